// probe_test.cc — the GPU plugins load and decline cleanly where they cannot run.
//
// Both .so files are dlopened as built (no GPU code runs): the real probe on this
// machine, then every branch of the probe through a fake driver (fake_cuda.c), and
// memra_plugin_open where no usable device exists.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

extern "C" {
#include "plugins/include/memra_plugin.h"
}

namespace {

struct Plugin {
  const char *name;
  const char *path;
  const char *needs;  // "sm_90"
  const char *own_cc; // fake spec of the CC it runs on
  const char *other_cc;
};

const Plugin kPlugins[] = {
    {"sm90a", "backends/sm90a/libmemra_sm90a.so", "sm_90", "9.0", "12.0"},
    {"sm120a", "backends/sm120a/libmemra_sm120a.so", "sm_120", "12.0", "9.0"},
};
const char kFake[] = "tests/gpu_plugins/libfake_cuda.so";

class GpuPlugin : public ::testing::TestWithParam<Plugin> {
protected:
  void SetUp() override {
    h_ = dlopen(GetParam().path, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h_, nullptr) << dlerror();
    probe_ = (memra_plugin_probe_fn)dlsym(h_, MEMRA_PLUGIN_PROBE_SYMBOL);
    open_ = (memra_plugin_open_fn)dlsym(h_, MEMRA_PLUGIN_OPEN_SYMBOL);
    ASSERT_NE(probe_, nullptr);
    ASSERT_NE(open_, nullptr);
  }
  void TearDown() override {
    unsetenv("MEMRA_LIBCUDA");
    unsetenv("MEMRA_FAKE_CUDA");
    // Kept loaded: static cudart registers exit handlers in the plugin.
  }
  // Probe through the fake driver answering `spec`.
  const memra_plugin_info *Fake(const char *spec) {
    char *real = realpath(kFake, nullptr);
    EXPECT_NE(real, nullptr) << kFake;
    setenv("MEMRA_LIBCUDA", real ? real : kFake, 1);
    free(real);
    setenv("MEMRA_FAKE_CUDA", spec, 1);
    return probe_();
  }
  void *h_ = nullptr;
  memra_plugin_probe_fn probe_ = nullptr;
  memra_plugin_open_fn open_ = nullptr;
};

TEST_P(GpuPlugin, InfoHeaderIsThisAbi) {
  const memra_plugin_info *info = probe_();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->abi_major, MEMRA_ABI_MAJOR);
  EXPECT_EQ(info->abi_minor, MEMRA_ABI_MINOR);
  EXPECT_EQ(info->struct_size, sizeof(memra_plugin_info));
  EXPECT_STREQ(info->name, GetParam().name);
  ASSERT_NE(info->why, nullptr);
  EXPECT_NE(info->why[0], '\0');
}

TEST_P(GpuPlugin, RealProbeOnThisMachine) {
  const memra_plugin_info *info = probe_();
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  void *any = drv ? drv : dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!any) { // a machine with no driver: the CI case
    EXPECT_EQ(info->score, 0);
    EXPECT_STREQ(info->why, "no NVIDIA driver (libcuda.so.1 not found)");
  } else {
    EXPECT_TRUE(info->score == 0 || info->score == 100) << info->why;
  }
}

TEST_P(GpuPlugin, MissingDriverFile) {
  setenv("MEMRA_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  const memra_plugin_info *info = probe_();
  EXPECT_EQ(info->score, 0);
  EXPECT_STREQ(info->why, "no NVIDIA driver (/nonexistent/libcuda.so.1 not found)");
}

TEST_P(GpuPlugin, DriverWithoutEntryPoints) {
  // libc is a loadable library without cuInit.
  setenv("MEMRA_LIBCUDA", "libc.so.6", 1);
  const memra_plugin_info *info = probe_();
  EXPECT_EQ(info->score, 0);
  EXPECT_STREQ(info->why, "NVIDIA driver libc.so.6 lacks the driver API entry points");
}

TEST_P(GpuPlugin, NoDeviceFromInit) {
  const memra_plugin_info *info = Fake("init=100");
  EXPECT_EQ(info->score, 0);
  EXPECT_STREQ(info->why, "no CUDA device");
}

TEST_P(GpuPlugin, NoDeviceFromCount) {
  const memra_plugin_info *info = Fake("0");
  EXPECT_EQ(info->score, 0);
  EXPECT_STREQ(info->why, "no CUDA device");
}

TEST_P(GpuPlugin, InitFailure) {
  const memra_plugin_info *info = Fake("init=999");
  EXPECT_EQ(info->score, 0);
  EXPECT_STREQ(info->why, "NVIDIA driver failed to initialise (cuInit error 999)");
}

TEST_P(GpuPlugin, UnreadableCapability) {
  const memra_plugin_info *info = Fake("1");
  EXPECT_EQ(info->score, 0);
  EXPECT_STREQ(info->why, "could not read the compute capability of device 0");
}

TEST_P(GpuPlugin, WrongArchitecture) {
  const memra_plugin_info *info = Fake("1:8.9:NVIDIA GeForce RTX 4090");
  EXPECT_EQ(info->score, 0);
  EXPECT_EQ(std::string(info->why),
            std::string("device 0 is sm_89 (NVIDIA GeForce RTX 4090), this plugin needs ") +
                GetParam().needs);
}

TEST_P(GpuPlugin, OtherGpuPluginsArchitecture) {
  std::string spec = std::string("2:") + GetParam().other_cc + ":NVIDIA Other";
  const memra_plugin_info *info = Fake(spec.c_str());
  EXPECT_EQ(info->score, 0) << info->why;
}

TEST_P(GpuPlugin, SameMajorOtherMinorDeclines) {
  // Arch-specific SASS runs on its exact compute capability only (sm_90a not on 9.1).
  std::string cc = GetParam().own_cc;
  cc[cc.size() - 1] = '1';
  std::string spec = "1:" + cc + ":NVIDIA Next";
  const memra_plugin_info *info = Fake(spec.c_str());
  EXPECT_EQ(info->score, 0) << info->why;
}

TEST_P(GpuPlugin, MatchingArchitectureScores100) {
  std::string spec = std::string("2:") + GetParam().own_cc + ":NVIDIA H200";
  const memra_plugin_info *info = Fake(spec.c_str());
  EXPECT_EQ(info->score, 100);
  std::string want = std::string("device 0 is ") + GetParam().needs + " (NVIDIA H200), 2 device(s)";
  EXPECT_EQ(std::string(info->why), want);
}

TEST_P(GpuPlugin, OpenFailsCleanlyWithoutUsableDevice) {
  if (probe_()->score > 0) GTEST_SKIP() << "a usable GPU is present";
  memra_open_params params = {};
  params.struct_size = sizeof params;
  memra_backend *be = reinterpret_cast<memra_backend *>(0x1);
  char err[256] = "";
  const memra_backend_vt *vt = open_(&params, &be, err, sizeof err);
  EXPECT_EQ(vt, nullptr);
  EXPECT_EQ(be, nullptr);
  std::string msg = err;
  EXPECT_EQ(msg.rfind(std::string(GetParam().name) + ": ", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  EXPECT_EQ(open_(&params, nullptr, err, sizeof err), nullptr);
  EXPECT_EQ(std::string(err), std::string(GetParam().name) + ": out is NULL");
}

INSTANTIATE_TEST_SUITE_P(Both, GpuPlugin, ::testing::ValuesIn(kPlugins),
                         [](const ::testing::TestParamInfo<Plugin> &i) {
                           return std::string(i.param.name);
                         });

} // namespace
