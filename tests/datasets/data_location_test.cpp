// snn::installed_data_dir: an installed program finds the data installed
// beside it; the build tree's program falls back to the source tree's copy.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "snn/datasets/data_location.h"

namespace snn {
namespace {

// A scratch "prefix" with bin/ (the program's folder) and, when asked, the
// installed data folder share/snnsim/mnist.
class DataLocation : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/snn_data_location_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    char real[PATH_MAX];
    ASSERT_NE(::realpath(tmpl, real), nullptr);
    prefix_ = real;
    mkdirs("bin");
  }
  void TearDown() override { ASSERT_EQ(std::system(("rm -rf '" + prefix_ + "'").c_str()), 0); }
  void mkdirs(const std::string& relative) {
    ASSERT_EQ(std::system(("mkdir -p '" + prefix_ + "/" + relative + "'").c_str()), 0);
  }
  std::string exe() const { return prefix_ + "/bin/snnsim"; }
  std::string prefix_;
};

constexpr const char* kRelative = "../share/snnsim/mnist";
constexpr const char* kSource = "/src/datasets/mnist";

TEST_F(DataLocation, InstalledCopyBesideTheExecutableWins) {
  mkdirs("share/snnsim/mnist");
  // Resolved: no "bin/.." in what runs record as their data folder.
  EXPECT_EQ(installed_data_dir(exe(), kRelative, kSource), prefix_ + "/share/snnsim/mnist");
}

TEST_F(DataLocation, WithoutAnInstalledCopyTheFallback) {
  EXPECT_EQ(installed_data_dir(exe(), kRelative, kSource), kSource);
  // A file of that name is not a data folder.
  mkdirs("share/snnsim");
  ASSERT_EQ(std::system(("touch '" + prefix_ + "/share/snnsim/mnist'").c_str()), 0);
  EXPECT_EQ(installed_data_dir(exe(), kRelative, kSource), kSource);
}

TEST_F(DataLocation, UnknownExecutableGivesTheFallback) {
  mkdirs("share/snnsim/mnist");
  EXPECT_EQ(installed_data_dir("", kRelative, kSource), kSource);
}

TEST_F(DataLocation, AbsoluteRelativeIsUsedAsItIs) {
  mkdirs("data/mnist");
  EXPECT_EQ(installed_data_dir("/elsewhere/bin/snnsim", prefix_ + "/data/mnist", kSource), prefix_ + "/data/mnist");
}

TEST_F(DataLocation, SymlinkedExecutableFolderResolves) {
  // A program reached through a symlinked folder (/usr/local/bin -> PREFIX/bin
  // style) still finds PREFIX's data.
  mkdirs("share/snnsim/mnist");
  const std::string link = prefix_ + "/linked-bin";
  ASSERT_EQ(::symlink((prefix_ + "/bin").c_str(), link.c_str()), 0);
  EXPECT_EQ(installed_data_dir(link + "/snnsim", kRelative, kSource), prefix_ + "/share/snnsim/mnist");
}

TEST(RunningExecutable, IsThisTestProgram) {
  const std::string exe = running_executable();
  ASSERT_FALSE(exe.empty());
  EXPECT_EQ(exe.substr(exe.rfind('/') + 1), "datasets_location_test");
}

}  // namespace
}  // namespace snn
