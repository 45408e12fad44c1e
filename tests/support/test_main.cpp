// Test entry point: fixes LibTorch's thread count so that timing and
// thread-invariance tests start from a known state on any machine.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  at::set_num_threads(2);
  return RUN_ALL_TESTS();
}
