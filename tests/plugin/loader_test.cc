// Plugin discovery and loading: the CPU plugin and stand-ins, each a separate .so target
// copied into a temporary plugin directory (nothing here links a plugin).
extern "C" {
#include "core/plugin/loader.h"
}
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

static std::string tmpdir(const std::string &name) {
  std::string d = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  std::string cmd = "rm -rf '" + d + "' && mkdir -p '" + d + "'";
  EXPECT_EQ(0, system(cmd.c_str()));
  return d;
}

static void drop(const std::string &so, const std::string &dir, const std::string &as) {
  std::string cmd = "cp '" + so + "' '" + dir + "/" + as + "'";
  ASSERT_EQ(0, system(cmd.c_str()));
}

static const char *kCpu = "plugins/cpu/libmemra_cpu.so";

TEST(Loader, DroppedPluginIsFoundAndRunsAnOp) {
  std::string dir = tmpdir("drop");
  drop(kCpu, dir, "libmemra_cpu.so");
  memra_backend_handle h;
  memra_err err = {};
  memra_open_params p = {sizeof p, 1, 0};
  ASSERT_EQ(MEMRA_OK, memra_backend_open("cpu", dir.c_str(), &p, &h, &err)) << err.msg;
  EXPECT_STREQ("cpu", h.name);
  EXPECT_EQ(dir + "/libmemra_cpu.so", std::string(h.path));
  // A real op through the vtable: y = a + b on 37 floats.
  memra_buf *buf;
  ASSERT_EQ(MEMRA_OK, h.vt->buf_alloc(h.be, 3 * 37 * 4, &buf));
  float a[37], b[37], y[37];
  for (int i = 0; i < 37; ++i)
    a[i] = 0.5f * i - 3, b[i] = 1.25f * (i % 5) + 0.1f;
  ASSERT_EQ(MEMRA_OK, h.vt->buf_upload(h.be, buf, 0, a, sizeof a));
  ASSERT_EQ(MEMRA_OK, h.vt->buf_upload(h.be, buf, 37 * 4, b, sizeof b));
  memra_tensor ta = {buf, 0, MEMRA_TYPE_F32, 0, 37, 1, 37 * 4}, tb = ta, ty = ta;
  tb.offset = 37 * 4;
  ty.offset = 2 * 37 * 4;
  ASSERT_EQ(MEMRA_OK, h.vt->add(h.be, &ty, &ta, &tb)) << h.vt->last_error(h.be);
  ASSERT_EQ(MEMRA_OK, h.vt->buf_download(h.be, buf, ty.offset, y, sizeof y));
  for (int i = 0; i < 37; ++i)
    EXPECT_EQ(a[i] + b[i], y[i]) << i;
  h.vt->buf_free(h.be, buf);
  memra_backend_close(&h);
}

TEST(Loader, AutoPicksTheHighestScore) {
  std::string dir = tmpdir("auto");
  drop(kCpu, dir, "libmemra_cpu.so");
  drop("tests/plugin/libmemra_fakehigh.so", dir, "libmemra_fakehigh.so");
  drop("tests/plugin/libmemra_fakedecline.so", dir, "libmemra_fakedecline.so");
  memra_plugin_list list;
  memra_plugin_scan(dir.c_str(), &list);
  int seen = 0;
  for (size_t i = 0; i < list.n; ++i) {
    std::string name = list.items[i].name;
    if (name == "cpu") {
      EXPECT_EQ(1, list.items[i].score);
      ++seen;
    }
    if (name == "fakehigh") {
      EXPECT_EQ(50, list.items[i].score);
      ++seen;
    }
    if (name == "fakedecline") {
      EXPECT_EQ(0, list.items[i].score);
      EXPECT_STREQ("needs a device this machine lacks", list.items[i].why);
      ++seen;
    }
  }
  EXPECT_EQ(3, seen);
  memra_backend_handle h;
  memra_err err = {};
  memra_open_params p = {sizeof p, 1, 0};
  ASSERT_EQ(MEMRA_OK, memra_backend_open("auto", dir.c_str(), &p, &h, &err)) << err.msg;
  EXPECT_STREQ("fakehigh", h.name);
  memra_backend_close(&h);
  // Naming a declining plugin gives its reason.
  EXPECT_EQ(MEMRA_E_UNSUPPORTED, memra_backend_open("fakedecline", dir.c_str(), &p, &h, &err));
  EXPECT_NE(nullptr, strstr(err.msg, "cannot run here: needs a device this machine lacks"))
      << err.msg;
}

TEST(Loader, EnvironmentPathIsSearched) {
  std::string dir = tmpdir("env");
  drop(kCpu, dir, "libmemra_cpu.so");
  setenv("MEMRA_PLUGIN_PATH", ("/nonexistent:" + dir).c_str(), 1);
  memra_backend_handle h;
  memra_err err = {};
  memra_open_params p = {sizeof p, 1, 0};
  EXPECT_EQ(MEMRA_OK, memra_backend_open("cpu", nullptr, &p, &h, &err)) << err.msg;
  EXPECT_EQ(dir + "/libmemra_cpu.so", std::string(h.path));
  memra_backend_close(&h);
  unsetenv("MEMRA_PLUGIN_PATH");
}

TEST(Loader, OtherAbiMajorIsRefusedNamingBothVersions) {
  memra_backend_handle h;
  memra_err err = {};
  memra_open_params p = {sizeof p, 1, 0};
  EXPECT_EQ(MEMRA_E_ABI,
            memra_backend_open("tests/plugin/libmemra_fakeabi.so", nullptr, &p, &h, &err));
  EXPECT_NE(nullptr, strstr(err.msg, "libmemra_fakeabi.so: plugin ABI 99, this memra needs ABI 1"))
      << err.msg;
}

TEST(Loader, SharedObjectWithoutEntryPointsIsRefused) {
  std::string dir = tmpdir("nosyms");
  drop("tests/plugin/libnot_a_plugin.so", dir, "libmemra_bogus.so");
  memra_backend_handle h;
  memra_err err = {};
  memra_open_params p = {sizeof p, 1, 0};
  std::string path = dir + "/libmemra_bogus.so";
  EXPECT_EQ(MEMRA_E_ABI, memra_backend_open(path.c_str(), nullptr, &p, &h, &err));
  EXPECT_EQ(path + ": not a memra plugin (missing symbol memra_plugin_probe)",
            std::string(err.msg));
  // A scan reports it as unusable instead of failing.
  memra_plugin_list list;
  memra_plugin_scan(dir.c_str(), &list);
  ASSERT_GE(list.n, 1u);
  EXPECT_EQ(MEMRA_E_ABI, list.items[0].status);
}

TEST(Loader, MissingFileAndUnknownNameAreClearErrors) {
  memra_backend_handle h;
  memra_err err = {};
  memra_open_params p = {sizeof p, 1, 0};
  EXPECT_EQ(MEMRA_E_IO, memra_backend_open("/nonexistent/libmemra_x.so", nullptr, &p, &h, &err));
  EXPECT_EQ("/nonexistent/libmemra_x.so: No such file or directory", std::string(err.msg));
  std::string dir = tmpdir("empty");
  EXPECT_EQ(MEMRA_E_NOT_FOUND, memra_backend_open("sm77x", dir.c_str(), &p, &h, &err));
  EXPECT_NE(nullptr, strstr(err.msg, "backend 'sm77x' not found")) << err.msg;
}
