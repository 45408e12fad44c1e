#pragma once
// "Did you mean ...?": the nearest valid name to a misspelt one, for the
// messages of unknown commands, flags, config keys and choices.

#include <algorithm>
#include <string>
#include <vector>

namespace snn::app {

/// The optimal-string-alignment distance between `a` and `b`: insertions,
/// deletions, substitutions and swaps of two neighbours each cost 1, so
/// that the commonest typos ("trian", "--tua", "layer") are one edit away.
inline size_t edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

/// The candidate nearest to `word`, or "" when none is close enough to be a
/// plausible typo: at most 1 edit for short words, up to 3 for long ones
/// (a third of the word), case ignored; a candidate that `word` begins
/// (an abbreviation of at least 3 letters, "--check" for "--checkpoint") also
/// counts. Ties go to the first candidate.
inline std::string nearest_name(const std::string& word, const std::vector<std::string>& candidates) {
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
  };
  const std::string w = lower(word);
  const size_t limit = std::min<size_t>(3, std::max<size_t>(1, w.size() / 3));
  std::string best;
  size_t best_distance = limit + 1;
  for (const auto& c : candidates) {
    const std::string lc = lower(c);
    size_t dist = edit_distance(w, lc);
    if (dist > limit && w.size() >= 3 && lc.rfind(w, 0) == 0) dist = limit;  // an abbreviation
    if (dist < best_distance) {
      best = c;
      best_distance = dist;
    }
  }
  return best;
}

/// "a, b, c".
inline std::string join_names(const std::vector<std::string>& names, const std::string& separator = ", ") {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : separator) + n;
  return out;
}

}  // namespace snn::app
