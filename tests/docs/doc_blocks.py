#!/usr/bin/env python3
"""Every fenced code block of a Markdown document, compiled, run or checked.

    doc_blocks.py extract-cpp DOC OUT.cpp
        (CMake, at configure time) writes the document's ```cpp blocks as one
        translation unit: block k becomes a function, `OUT k` runs it. A
        document without C++ blocks removes OUT.cpp.
    doc_blocks.py run DOC --source-dir S --build-dir B --python PY [--cpp-exe E]
        runs the document's blocks in order in one scratch folder (CTest).
    doc_blocks.py list DOC
        prints each block's line, language and what will be done with it.

What is done with a block, by its language and by a directive, an HTML
comment on the line(s) just above it (blank lines allowed in between):
    sh       run with bash -euo pipefail in the scratch folder
    python   run with the project's Python (h5py, numpy) in the scratch folder
    cpp      compiled by CMake (one program per document), run in the folder
    toml     parsed; json parsed
    <!-- output -->            a text block: what the previous block printed.
                               Numbers match any number, runs of blanks match
                               any, a line `...` stands for any lines (none
                               included) and `...` within a line for any
                               text; everything else must match in order.
    <!-- same-as: PATH -->     every line of the block stands in PATH, in
                               order (blanks folded); `...` lines skipped.
    <!-- usage: snnsim CMD --> a synopsis: each --flag in it is in `snnsim
                               CMD --help` (the block is not run).
    <!-- checked-by: NAME, ... -->  run by other tests: each NAME is a CTest
                               test of this build or a script of the source
                               tree that CI runs (the block is not run here).
    <!-- needs-gpu: REASON --> commands for a machine with an NVIDIA GPU (sh
                               blocks only): the scripts they run exist and
                               parse (bash -n); scripts/gpu-check.sh runs
                               them on the device machine.
    <!-- not-code: REASON -->  a diagram or a formula (text blocks only).
A block of any other language, or a text block without a directive, fails.

The scratch folder holds links to the build (`build/`), the sources a user
has beside it (examples/, datasets/, tools/, scripts/, bench/) and `.venv`,
so the blocks run as written from the repository root. A document that
names `out/mnist/checkpoint.h5` gets a copy of one trained once for all
documents (`train-checkpoint`: the main job's configuration for one epoch,
where the real main job trains 12), so its outputs are checked for their
form, not for the main job's numbers.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

DIRECTIVE = re.compile(r"<!--\s*(output|same-as|usage|checked-by|needs-gpu|not-code)\s*(?::\s*(.*?))?\s*-->")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
RUN_LANGS = {"sh", "python", "cpp"}
TEXT_LANGS = {"", "text"}
ALL_LANGS = RUN_LANGS | TEXT_LANGS | {"toml", "json", "cmake"}
BLOCK_TIMEOUT_S = 900


class Block:
    def __init__(self, line, lang, text, directive, argument):
        self.line, self.lang, self.text = line, lang, text
        self.directive, self.argument = directive, argument


def blocks_of(path):
    """The document's fenced blocks with the directive just above each."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        if i == len(lines):
            raise SystemExit(f"{path}:{start}: code block never closed")
        i += 1
        directive = argument = None
        j = start - 2
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0:
            d = DIRECTIVE.search(lines[j])
            if d:
                directive, argument = d.group(1), d.group(2)
        out.append(Block(start, lang, "\n".join(body) + "\n", directive, argument))
    return out


def what_is_done(b):
    if b.lang not in ALL_LANGS:
        return None, f"a ```{b.lang} block: no test knows this language"
    if b.directive == "not-code":
        if b.lang not in TEXT_LANGS:
            return None, f"not-code on a ```{b.lang} block: code must be checked"
        if not b.argument:
            return None, "not-code needs a reason"
        return "not-code", b.argument
    if b.directive:
        if b.directive != "output" and not b.argument:
            return None, f"{b.directive} needs an argument"
        return b.directive, b.argument or ""
    if b.lang in RUN_LANGS or b.lang in ("toml", "json"):
        return b.lang, ""
    return None, f"a ```{b.lang or 'untagged'} block with no directive: say what checks it"


# --- C++: one program per document -------------------------------------------------------

def extract_cpp(doc, out):
    parts, includes = [], []
    for k, b in enumerate(blocks_of(doc)):
        if b.lang != "cpp" or b.directive:
            continue
        body = []
        for line in b.text.splitlines():
            (includes if line.startswith("#include") else body).append(line)
        parts.append((k, b.line, body))
    if not parts:
        if os.path.exists(out):
            os.remove(out)
        return
    src = [f"// Generated by tests/docs/doc_blocks.py from {os.path.basename(doc)}: do not edit.",
           *dict.fromkeys(includes), "#include <cstdlib>", "#include <cstring>", "#include <iostream>", ""]
    for k, line, body in parts:
        src.append(f"// {os.path.basename(doc)}, the block at line {line}")
        src.append(f"static void doc_block_{k}() {{")
        src.extend("  " + l if l else "" for l in body)
        src.append("}")
        src.append("")
    src.append("int main(int argc, char** argv) {")
    src.append("  if (argc != 2) { std::cerr << \"usage: doc_program BLOCK\\n\"; return 2; }")
    src.append("  const int k = std::atoi(argv[1]);")
    src.append("  try {")
    for k, _, _ in parts:
        src.append(f"    if (k == {k}) {{ doc_block_{k}(); return 0; }}")
    src.append("  } catch (const std::exception& e) { std::cerr << \"error: \" << e.what() << \"\\n\"; return 1; }")
    src.append("  std::cerr << \"no C++ block \" << k << \"\\n\";")
    src.append("  return 2;")
    src.append("}")
    text = "\n".join(src) + "\n"
    # Rewritten only when it changes, so a reconfigure does not rebuild it.
    if not os.path.exists(out) or open(out, encoding="utf-8").read() != text:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(out + ".tmp", out)


# --- matching what a block printed --------------------------------------------------------

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?%?")


def normalise(line):
    return " ".join(NUMBER.sub("#", line).split())


def line_matches(pattern, line):
    parts = [normalise(part) for part in pattern.split("...")]
    return re.fullmatch(r"\s*.*?\s*".join(re.escape(part) for part in parts), normalise(line)) is not None


def output_matches(expected, actual):
    """None when `actual` has the form of `expected`, else what differs."""
    want = expected.rstrip("\n").split("\n")
    got = actual.rstrip("\n").split("\n")

    def match(i, j):
        # want[i:] against got[j:]; `...` lines take any lines (memoised).
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(want):
            r = j == len(got)
        elif want[i].strip() == "...":
            r = any(match(i + 1, jj) for jj in range(j, len(got) + 1))
        else:
            r = j < len(got) and line_matches(want[i], got[j]) and match(i + 1, j + 1)
        memo[key] = r
        return r

    memo = {}
    if match(0, 0):
        return None
    # Say the first line of the document that cannot be found in order.
    j = 0
    for w in want:
        if w.strip() == "...":
            continue
        while j < len(got) and not line_matches(w, got[j]):
            j += 1
        if j == len(got):
            return f"the line {w.strip()!r} is not in the output (in order)"
        j += 1
    return "lines the document does not show are in the output (add `...` where it abridges)"


# --- running ------------------------------------------------------------------------------

def make_scratch(args, doc_text):
    scratch = tempfile.mkdtemp(prefix="snn-doc-")
    for name in ("examples", "datasets", "tools", "scripts", "bench"):
        os.symlink(os.path.join(args.source_dir, name), os.path.join(scratch, name))
    os.symlink(args.build_dir, os.path.join(scratch, "build"))
    venv = os.path.dirname(os.path.dirname(os.path.abspath(args.python)))
    os.symlink(venv, os.path.join(scratch, ".venv"))
    if "out/mnist/checkpoint.h5" in doc_text:
        if not args.checkpoint or not os.path.isfile(args.checkpoint):
            raise SystemExit("the document names out/mnist/checkpoint.h5: give --checkpoint "
                             "(made by `doc_blocks.py train-checkpoint`, CTest's fixture doc_checkpoint)")
        os.makedirs(os.path.join(scratch, "out", "mnist"))
        shutil.copyfile(args.checkpoint, os.path.join(scratch, "out", "mnist", "checkpoint.h5"))
    return scratch


def train_checkpoint(args):
    """The main job's network trained for one epoch (the real main job trains 12)."""
    snnsim = os.path.join(args.build_dir, "apps", "snnsim", "snnsim")
    config = os.path.join(args.source_dir, "examples", "mnist", "mnist.toml")
    out = os.path.abspath(args.out)
    r = subprocess.run([snnsim, "--config", config, "train", "--epochs", "1", "--checkpoint", out,
                        "--data-dir", os.path.join(args.source_dir, "datasets", "mnist")],
                       capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    print(r.stdout + r.stderr, end="")
    return r.returncode


def ctest_names(build_dir):
    r = subprocess.run(["ctest", "-N"], cwd=build_dir, capture_output=True, text=True)
    return {m.group(1) for m in re.finditer(r"Test\s+#\d+:\s+(\S+)", r.stdout)}


def ci_scripts(source_dir):
    """Scripts CI runs: .ci/run and what it and they call with `bash scripts/...`."""
    seen, todo = set(), [".ci/run"]
    while todo:
        s = todo.pop()
        if s in seen or not os.path.exists(os.path.join(source_dir, s)):
            continue
        seen.add(s)
        todo.extend(re.findall(r"bash\s+(scripts/[\w./-]+\.sh)", open(os.path.join(source_dir, s)).read()))
    return seen


def folded_lines(text):
    return [" ".join(l.split()) for l in text.splitlines() if l.strip() and l.strip() != "..."]


def run_doc(args):
    doc = os.path.abspath(args.doc)
    name = os.path.relpath(doc, args.source_dir)
    blocks = blocks_of(doc)
    failures, done = [], {}
    scratch = make_scratch(args, open(doc, encoding="utf-8").read())
    env = dict(os.environ)
    env.pop("SNN_CRASH_SEED", None)
    last_output, tests = None, None
    try:
        for k, b in enumerate(blocks):
            kind, arg = what_is_done(b)
            where = f"{name}:{b.line} ({b.lang or 'untagged'})"
            done[kind or "unchecked"] = done.get(kind or "unchecked", 0) + 1
            problem, printed = None, None
            if kind is None:
                problem = arg
            elif kind in ("sh", "python", "cpp"):
                if kind == "sh":
                    cmd = ["bash", "-euo", "pipefail", "-c", b.text]
                elif kind == "python":
                    cmd = [args.python, "-c", b.text]
                else:
                    if not args.cpp_exe:
                        raise SystemExit(f"{where}: a C++ block but no --cpp-exe (CMake builds it)")
                    cmd = [args.cpp_exe, str(k)]
                print(f"--- {where}: running", flush=True)
                began = time.monotonic()
                try:
                    r = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True,
                                       timeout=BLOCK_TIMEOUT_S)
                    printed = r.stdout
                    if r.returncode != 0:
                        problem = f"exit {r.returncode}:\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
                    elif r.stderr.strip() and kind != "sh":
                        print(r.stderr[-2000:], end="")
                except subprocess.TimeoutExpired:
                    problem = f"still running after {BLOCK_TIMEOUT_S} s"
                print(f"    ({time.monotonic() - began:.1f} s)", flush=True)
            elif kind == "toml":
                try:
                    tomllib.loads(b.text)
                except tomllib.TOMLDecodeError as e:
                    problem = f"not TOML: {e}"
            elif kind == "json":
                try:
                    json.loads(b.text)
                except json.JSONDecodeError as e:
                    problem = f"not JSON: {e}"
            elif kind == "output":
                if last_output is None:
                    problem = "an output block with no block before it that printed"
                else:
                    problem = output_matches(b.text, last_output)
                    if problem:
                        problem += f"\n--- what it printed:\n{last_output[-4000:]}"
            elif kind == "same-as":
                path = os.path.join(args.source_dir, arg)
                if not os.path.isfile(path):
                    problem = f"same-as: no file {arg}"
                else:
                    have = folded_lines(open(path, encoding="utf-8").read())
                    j = 0
                    for w in folded_lines(b.text):
                        while j < len(have) and have[j] != w:
                            j += 1
                        if j == len(have):
                            problem = f"the line {w!r} is not in {arg} (in order)"
                            break
                        j += 1
            elif kind == "usage":
                parts = arg.split()
                exe = os.path.join(args.build_dir, "apps", "snnsim", "snnsim") if parts[0] == "snnsim" \
                    else os.path.join(args.build_dir, parts[0])
                r = subprocess.run([exe, *parts[1:], "--help"], capture_output=True, text=True)
                helptext = r.stdout + r.stderr
                missing = [f for f in dict.fromkeys(re.findall(r"--[a-z][a-z0-9-]*", b.text))
                           if not re.search(re.escape(f) + r"(?![a-z0-9-])", helptext)]
                if r.returncode != 0:
                    problem = f"`{arg} --help` exited {r.returncode}"
                elif missing:
                    problem = f"`{arg} --help` has no {', '.join(missing)}"
            elif kind == "needs-gpu":
                if b.lang != "sh":
                    problem = "needs-gpu on a block that is not sh"
                scripts = re.findall(r"bash\s+(\S+\.sh)", b.text)
                if not scripts:
                    problem = "needs-gpu: the block runs no script"
                for s in scripts:
                    path = os.path.join(args.source_dir, s)
                    if not os.path.isfile(path):
                        problem = f"needs-gpu: no script {s}"
                    elif subprocess.run(["bash", "-n", path]).returncode != 0:
                        problem = f"needs-gpu: {s} does not parse"
            elif kind == "checked-by":
                if tests is None:
                    tests = ctest_names(args.build_dir)
                for what in (w.strip() for w in arg.split(",")):
                    if "/" in what or what.endswith(".sh"):
                        if what not in ci_scripts(args.source_dir):
                            problem = f"checked-by: {what} is not a script that CI runs"
                    elif what not in tests:
                        problem = f"checked-by: no CTest test {what} in {args.build_dir}"
            if kind in ("sh", "python", "cpp"):
                last_output = printed
            if problem:
                failures.append(f"{where}: {problem}")
                print(f"FAIL {where}: {problem}", flush=True)
            else:
                print(f"ok   {where}: {kind}{' ' + arg if arg and kind != 'not-code' else ''}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(done.items(), key=lambda x: str(x[0])))
    print(f"{name}: {len(blocks)} blocks ({summary})")
    if not blocks:
        print(f"{name}: no code blocks")
    print(f"{len(blocks) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


def self_test(args):
    """The checker fails what it should: wrong output, a failing block, an unchecked block."""
    assert line_matches("trained on .../mnist (8000 train", "trained on /a/b/mnist (300 train")
    assert not line_matches("accuracy 0.9", "loss 0.9")
    assert output_matches("a\n...\nc 1\n", "a\nb\nb\nc 7\n") is None
    assert output_matches("a\nc\n", "a\nb\nc\n") is not None          # an abridged block must say so
    assert output_matches("a\n", "b\n") is not None
    cases = {
        "a failing command": "```sh\nfalse\n```\n",
        "output that differs": "```sh\necho one 1\n```\n<!-- output -->\n```\ntwo 1\n```\n",
        "a text block nobody checks": "```\nls -l\n```\n",
        "not-code on code": "<!-- not-code: no -->\n```sh\nls\n```\n",
        "an unknown test": "<!-- checked-by: no_such_test -->\n```sh\nls\n```\n",
        "a file that differs": "<!-- same-as: README.md -->\n```\nno such line in the README\n```\n",
        "bad TOML": "```toml\n[a\n```\n",
        "an unknown language": "```rust\nfn main() {}\n```\n",
    }
    good = "```sh\necho one 2\n```\n<!-- output -->\n```\none 5\n```\n```json\n{\"a\": 1}\n```\n"
    with tempfile.TemporaryDirectory() as d:
        for what, text in [*cases.items(), ("a good document", good)]:
            doc = os.path.join(d, "doc.md")
            with open(doc, "w") as f:
                f.write(text)
            ns = argparse.Namespace(doc=doc, source_dir=args.source_dir, build_dir=args.build_dir,
                                    python=args.python, cpp_exe=None, checkpoint=None)
            rc = run_doc(ns)
            want = 0 if what == "a good document" else 1
            assert rc == want, f"{what}: exit {rc}, expected {want}"
    print("self-test: 9 documents judged as expected")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract-cpp")
    e.add_argument("doc")
    e.add_argument("out")
    r = sub.add_parser("run")
    r.add_argument("doc")
    r.add_argument("--source-dir", required=True)
    r.add_argument("--build-dir", required=True)
    r.add_argument("--python", required=True)
    r.add_argument("--cpp-exe")
    r.add_argument("--checkpoint", help="copied to out/mnist/checkpoint.h5 for documents that name it")
    t = sub.add_parser("train-checkpoint")
    t.add_argument("out")
    t.add_argument("--source-dir", required=True)
    t.add_argument("--build-dir", required=True)
    s = sub.add_parser("self-test")
    s.add_argument("--source-dir", required=True)
    s.add_argument("--build-dir", required=True)
    s.add_argument("--python", required=True)
    l = sub.add_parser("list")
    l.add_argument("doc")
    args = p.parse_args()
    if args.cmd == "extract-cpp":
        extract_cpp(args.doc, args.out)
        return 0
    if args.cmd == "list":
        for b in blocks_of(args.doc):
            kind, arg = what_is_done(b)
            print(f"{args.doc}:{b.line} {b.lang or 'untagged'}: {kind or 'FAIL'} {arg}")
        return 0
    args.source_dir = os.path.abspath(args.source_dir)
    args.build_dir = os.path.abspath(args.build_dir)
    if args.cmd == "train-checkpoint":
        return train_checkpoint(args)
    if args.cmd == "self-test":
        return self_test(args)
    return run_doc(args)


if __name__ == "__main__":
    sys.exit(main())
