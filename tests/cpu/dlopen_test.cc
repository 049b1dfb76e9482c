// dlopen_test.cc — the built libmemra_cpu.so is a real plugin: dlopen finds both entry
// points by the ABI's symbol names, and a backend opened through them runs an op.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

extern "C" {
#include "plugins/include/memra_plugin.h"
}

namespace {

std::string plugin_path() {
  const char *srcdir = getenv("TEST_SRCDIR");
  const char *ws = getenv("TEST_WORKSPACE");
  if (srcdir && ws) return std::string(srcdir) + "/" + ws + "/plugins/cpu/libmemra_cpu.so";
  return "plugins/cpu/libmemra_cpu.so";
}

} // namespace

TEST(CpuDlopen, EntryPointsResolveAndWork) {
  void *h = dlopen(plugin_path().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(nullptr, h) << dlerror();
  auto probe = reinterpret_cast<memra_plugin_probe_fn>(dlsym(h, MEMRA_PLUGIN_PROBE_SYMBOL));
  auto open = reinterpret_cast<memra_plugin_open_fn>(dlsym(h, MEMRA_PLUGIN_OPEN_SYMBOL));
  ASSERT_NE(nullptr, probe);
  ASSERT_NE(nullptr, open);
  const memra_plugin_info *info = probe();
  EXPECT_EQ(MEMRA_ABI_MAJOR, info->abi_major);
  EXPECT_EQ(1, info->score);
  EXPECT_STREQ("cpu", info->name);

  memra_open_params p = {sizeof p, 2, 0};
  memra_backend *be = nullptr;
  char err[256] = "";
  const memra_backend_vt *vt = open(&p, &be, err, sizeof err);
  ASSERT_NE(nullptr, vt) << err;
  // y = x . w^T with F32 w [2, 3]: exact small integers.
  std::vector<float> w = {1, 2, 3, -4, 5, -6}, x = {7, -8, 9}, y(2, 0);
  memra_buf *bw, *bx, *by;
  ASSERT_EQ(MEMRA_OK, vt->buf_alloc(be, 24, &bw));
  ASSERT_EQ(MEMRA_OK, vt->buf_alloc(be, 12, &bx));
  ASSERT_EQ(MEMRA_OK, vt->buf_alloc(be, 8, &by));
  ASSERT_EQ(MEMRA_OK, vt->buf_upload(be, bw, 0, w.data(), 24));
  ASSERT_EQ(MEMRA_OK, vt->buf_upload(be, bx, 0, x.data(), 12));
  memra_tensor tw = {bw, 0, MEMRA_TYPE_F32, 0, 3, 2, 12}, tx = {bx, 0, MEMRA_TYPE_F32, 0, 3, 1, 12},
               ty = {by, 0, MEMRA_TYPE_F32, 0, 2, 1, 8};
  ASSERT_EQ(MEMRA_OK, vt->matmul(be, &ty, &tx, &tw, nullptr)) << vt->last_error(be);
  ASSERT_EQ(MEMRA_OK, vt->buf_download(be, by, 0, y.data(), 8));
  EXPECT_EQ(7 - 16 + 27, y[0]);
  EXPECT_EQ(-28 - 40 - 54, y[1]);
  vt->buf_free(be, bw);
  vt->buf_free(be, bx);
  vt->buf_free(be, by);
  vt->close(be);
  dlclose(h);
}
