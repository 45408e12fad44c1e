#include <gtest/gtest.h>
#include <torch/torch.h>

#include "snn/core/error.h"
#include "snn/simulator/csv.h"
#include "snn/simulator/neuron_sim.h"

namespace snn {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_csv_matrix(text, "in.csv", torch::kFloat);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Csv, ReadsHeaderSpacesCrlfAndBlankLines) {
  const CsvMatrix m = parse_csv_matrix("a, b\r\n\r\n 1.5 ,+2\r\n-3e-1,4\r\n", "in.csv", torch::kDouble);
  EXPECT_EQ(m.header, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(torch::equal(m.values, torch::tensor({{1.5, 2.0}, {-0.3, 4.0}}, torch::kDouble)));
}

TEST(Csv, ParsesFloat32FieldsDirectlyInFloat32) {
  // 0.1 read as float must be the float nearest 0.1, not a double rounded twice.
  const CsvMatrix m = parse_csv_matrix("0.1,16777217\n", "in.csv", torch::kFloat);
  EXPECT_EQ(m.values.scalar_type(), torch::kFloat);
  EXPECT_EQ(m.values[0][0].item<float>(), 0.1f);
  EXPECT_EQ(m.values[0][1].item<float>(), 16777216.0f);
  EXPECT_TRUE(m.header.empty());
}

TEST(Csv, NamesFileLineAndColumnOfEveryProblem) {
  EXPECT_EQ(error_of("1,2\n3\n"), "in.csv line 2: 1 fields, but the first row has 2");
  EXPECT_EQ(error_of("1,2\n3,abc\n"), "in.csv line 2, column 2: 'abc' is not a number");
  EXPECT_EQ(error_of("1,2\n3,\n"), "in.csv line 2, column 2: empty field");
  EXPECT_EQ(error_of("1,nan\n"), "in.csv line 1, column 2: 'nan' is not a finite number");
  EXPECT_EQ(error_of(""), "in.csv holds no data rows");
  EXPECT_EQ(error_of("x,y\n"), "in.csv holds no data rows");
  EXPECT_EQ(error_of("1,2x\n"), "in.csv line 1, column 2: '2x' is not a number");
  EXPECT_THROW(read_csv_matrix("/nonexistent/file.csv", torch::kFloat), Error);
}

// Found by tests/fuzz (fuzz_csv): "+-1" was read as -1 (the '+' was
// skipped for from_chars, which then took the '-').
TEST(Csv, ASignIsFollowedByDigits) {
  EXPECT_EQ(error_of("1,+-1\n"), "in.csv line 1, column 2: '+-1' is not a number");
  EXPECT_EQ(error_of("1,+\n"), "in.csv line 1, column 2: '+' is not a number");
  EXPECT_EQ(error_of("1,++1\n"), "in.csv line 1, column 2: '++1' is not a number");
  EXPECT_EQ(parse_csv_matrix("+1,-1\n", "in.csv", torch::kFloat).values[0][0].item<float>(), 1.0f);
}

// Found by tests/fuzz (fuzz_csv): a number beyond the dtype was "not a number".
TEST(Csv, NumbersBeyondTheDtypeAreNamedAsSuch) {
  EXPECT_EQ(error_of("1,1e39\n"),
            "in.csv line 1, column 2: '1e39' is outside the range of float32 (magnitudes 1.4e-45 to 3.4e38, or 0)");
  EXPECT_EQ(error_of("4.9e-324\n"), "in.csv line 1, column 1: '4.9e-324' is outside the range of float32 "
                                     "(magnitudes 1.4e-45 to 3.4e38, or 0)");
  EXPECT_EQ(parse_csv_matrix("1e39\n", "in.csv", torch::kDouble).values[0][0].item<double>(), 1e39);
  // A header is a line without numbers: an out-of-range one is still a
  // number (a first row of them was dropped as a header, silently).
  EXPECT_EQ(error_of("1e39\n2\n"), "in.csv line 1, column 1: '1e39' is outside the range of float32 "
                                    "(magnitudes 1.4e-45 to 3.4e38, or 0)");
  EXPECT_EQ(error_of("a,b\n1e39,2\n"), "in.csv line 2, column 1: '1e39' is outside the range of float32 "
                                        "(magnitudes 1.4e-45 to 3.4e38, or 0)");
}

// A binary or garbled file gives one readable line: control and non-ASCII
// bytes escaped, long fields cut.
TEST(Csv, ErrorsShowFieldsEscapedAndShort) {
  EXPECT_EQ(error_of(std::string("1,2\n3,\x1b[2J\xff\0x\n", 14)),
            "in.csv line 2, column 2: '\\x1b[2J\\xff\\x00x' is not a number");
  EXPECT_EQ(error_of("1," + std::string(100, 'z') + "\n"),
            "in.csv line 1, column 2: '" + std::string(40, 'z') + "...' is not a number");
}

TEST(NeuronSim, TraceCsvRoundTripsFloats) {
  NeuronParams p;
  const torch::Tensor x = torch::tensor({{0.3f, 1.7f}, {0.9f, 0.1f}});
  const NeuronSimResult r = simulate_neuron_layer(x, p);
  std::ostringstream os;
  write_neuron_trace_csv(os, r);
  const CsvMatrix back = parse_csv_matrix(os.str(), "trace", torch::kFloat);
  EXPECT_EQ(back.header, (std::vector<std::string>{"t", "neuron", "h", "s", "v"}));
  ASSERT_EQ(back.values.size(0), 4);
  // Row order: t-major, then neuron; every float reads back bit for bit.
  EXPECT_TRUE(torch::equal(back.values.select(1, 2), r.h.flatten()));
  EXPECT_TRUE(torch::equal(back.values.select(1, 3), r.s.flatten()));
  EXPECT_TRUE(torch::equal(back.values.select(1, 4), r.v.flatten()));
  EXPECT_THROW(simulate_neuron_layer(torch::rand({2, 2, 2}), p), Error);
}

}  // namespace
}  // namespace snn
