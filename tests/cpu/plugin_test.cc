// plugin_test.cc — entry points, the vtable, device info and buffers of the CPU plugin.
#include "tests/cpu/cpu_test_util.h"

#include <unistd.h>

using namespace cputest;

TEST(CpuPlugin, ProbeScoresOneAndSaysThreads) {
  const memra_plugin_info *info = memra_plugin_probe();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(MEMRA_ABI_MAJOR, info->abi_major);
  EXPECT_EQ(MEMRA_ABI_MINOR, info->abi_minor);
  EXPECT_EQ(sizeof(memra_plugin_info), info->struct_size);
  EXPECT_EQ(1, info->score);
  EXPECT_STREQ("cpu", info->name);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  std::string want =
      "CPU reference plugin, " + std::to_string(n) + (n == 1 ? " thread" : " threads");
  EXPECT_EQ(want, info->why);
}

TEST(CpuPlugin, VtableIsCompleteAndEager) {
  Cpu c(3);
  ASSERT_NE(c.vt, nullptr);
  EXPECT_EQ(MEMRA_ABI_MAJOR, c.vt->abi_major);
  EXPECT_EQ(sizeof(memra_backend_vt), c.vt->struct_size);
  EXPECT_STREQ("cpu", c.vt->name);
  const void *slots[] = {
      (void *)c.vt->close,        (void *)c.vt->last_error, (void *)c.vt->device_info,
      (void *)c.vt->buf_alloc,    (void *)c.vt->buf_free,   (void *)c.vt->buf_upload,
      (void *)c.vt->buf_download, (void *)c.vt->buf_copy,   (void *)c.vt->synchronize,
      (void *)c.vt->get_rows,     (void *)c.vt->rmsnorm,    (void *)c.vt->matmul,
      (void *)c.vt->rope,         (void *)c.vt->kv_store,   (void *)c.vt->attention,
      (void *)c.vt->glu,          (void *)c.vt->add,        (void *)c.vt->scale,
      (void *)c.vt->argmax,       (void *)c.vt->add_i32,    (void *)c.vt->get_proc};
  for (const void *s : slots)
    EXPECT_NE(s, nullptr);
  EXPECT_EQ(nullptr, c.vt->graph_begin);
  EXPECT_EQ(nullptr, c.vt->graph_end);
  EXPECT_EQ(nullptr, c.vt->graph_launch);
  EXPECT_EQ(nullptr, c.vt->graph_free);
  EXPECT_EQ(nullptr, c.vt->get_proc(c.be, "anything"));
  EXPECT_EQ(MEMRA_OK, c.vt->synchronize(c.be));
}

TEST(CpuPlugin, DeviceInfoNamesThreadsAndMemory) {
  Cpu c(3);
  memra_device_info d;
  ASSERT_EQ(MEMRA_OK, c.vt->device_info(c.be, &d));
  EXPECT_STREQ("CPU (3 threads)", d.name);
  EXPECT_EQ(3, d.n_sms);
  EXPECT_EQ(0, d.cc_major);
  uint64_t total = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
  EXPECT_EQ(total, d.mem_total);
  EXPECT_GT(d.mem_free, 0u);
  EXPECT_LE(d.mem_free, d.mem_total);
  Cpu one(1);
  ASSERT_EQ(MEMRA_OK, one.vt->device_info(one.be, &d));
  EXPECT_STREQ("CPU (1 thread)", d.name);
}

TEST(CpuPlugin, ZeroThreadsMeansAllCores) {
  Cpu c(0);
  memra_device_info d;
  ASSERT_EQ(MEMRA_OK, c.vt->device_info(c.be, &d));
  EXPECT_EQ(sysconf(_SC_NPROCESSORS_ONLN), d.n_sms);
}

TEST(CpuPlugin, OpenRejectsBadThreadCountsWithOneLine) {
  for (int n : {-1, 100000}) {
    memra_open_params p = {sizeof(memra_open_params), n, 0};
    memra_backend *be = reinterpret_cast<memra_backend *>(0x1);
    char err[256] = "";
    EXPECT_EQ(nullptr, memra_plugin_open(&p, &be, err, sizeof err));
    EXPECT_EQ(nullptr, be);
    EXPECT_NE(std::string::npos, std::string(err).find("n_threads " + std::to_string(n))) << err;
    EXPECT_EQ(nullptr, strchr(err, '\n'));
  }
  char err[64] = "";
  EXPECT_EQ(nullptr, memra_plugin_open(nullptr, nullptr, err, sizeof err));
  EXPECT_STRNE("", err);
  // A caller whose struct stops before n_threads gets the default.
  memra_open_params old = {4, 99999, 0};
  memra_backend *be = nullptr;
  const memra_backend_vt *vt = memra_plugin_open(&old, &be, err, sizeof err);
  ASSERT_NE(nullptr, vt) << err;
  vt->close(be);
}

TEST(CpuBuffers, RoundTripAndCopy) {
  Cpu c;
  std::mt19937 g(7);
  const uint64_t n = 1031; // odd, not a multiple of the 64-byte alignment
  std::vector<uint8_t> a(n), b(n, 0);
  for (auto &x : a)
    x = (uint8_t)g();
  memra_buf *x = nullptr, *y = nullptr;
  ASSERT_EQ(MEMRA_OK, c.vt->buf_alloc(c.be, n, &x));
  ASSERT_EQ(MEMRA_OK, c.vt->buf_alloc(c.be, n, &y));
  ASSERT_EQ(MEMRA_OK, c.vt->buf_upload(c.be, x, 0, a.data(), n));
  ASSERT_EQ(MEMRA_OK, c.vt->buf_copy(c.be, y, 5, x, 0, n - 5));
  ASSERT_EQ(MEMRA_OK, c.vt->buf_download(c.be, y, 5, b.data(), n - 5));
  EXPECT_EQ(0, memcmp(a.data(), b.data(), n - 5));
  // Overlapping copy inside one buffer behaves like memmove.
  std::vector<uint8_t> want(a);
  memmove(want.data() + 3, want.data(), 100);
  ASSERT_EQ(MEMRA_OK, c.vt->buf_copy(c.be, x, 3, x, 0, 100));
  ASSERT_EQ(MEMRA_OK, c.vt->buf_download(c.be, x, 0, b.data(), n));
  EXPECT_EQ(want, b);
  // Zero-byte transfers at the very end are fine.
  EXPECT_EQ(MEMRA_OK, c.vt->buf_upload(c.be, x, n, a.data(), 0));
  c.vt->buf_free(c.be, x);
  c.vt->buf_free(c.be, y);
  memra_buf *z = nullptr;
  ASSERT_EQ(MEMRA_OK, c.vt->buf_alloc(c.be, 0, &z)); // an empty buffer is a buffer
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->buf_upload(c.be, z, 0, a.data(), 1));
  c.vt->buf_free(c.be, z);
  c.vt->buf_free(c.be, nullptr);
}

TEST(CpuBuffers, OutOfBoundsIsInvalidWithMessage) {
  Cpu c;
  memra_buf *x = nullptr;
  ASSERT_EQ(MEMRA_OK, c.vt->buf_alloc(c.be, 100, &x));
  uint8_t tmp[200] = {1};
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->buf_upload(c.be, x, 1, tmp, 100));
  EXPECT_NE(std::string::npos, c.err().find("buf_upload")) << c.err();
  EXPECT_NE(std::string::npos, c.err().find("100 bytes")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->buf_download(c.be, x, UINT64_MAX, tmp, 2)); // wraps
  EXPECT_NE(std::string::npos, c.err().find("buf_download")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->buf_download(c.be, x, 2, tmp, UINT64_MAX - 1));
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->buf_copy(c.be, x, 0, x, 60, 41));
  EXPECT_NE(std::string::npos, c.err().find("buf_copy: src")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->buf_copy(c.be, x, 60, x, 0, 41));
  EXPECT_NE(std::string::npos, c.err().find("buf_copy: dst")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->buf_upload(c.be, nullptr, 0, tmp, 1));
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->buf_upload(c.be, x, 0, nullptr, 1));
  c.vt->buf_free(c.be, x);
}

TEST(CpuBuffers, AbsurdAllocationIsOomNotACrash) {
  Cpu c;
  memra_buf *x = reinterpret_cast<memra_buf *>(0x1);
  EXPECT_EQ(MEMRA_E_OOM, c.vt->buf_alloc(c.be, UINT64_MAX, &x));
  EXPECT_EQ(nullptr, x);
  EXPECT_NE(std::string::npos, c.err().find("buf_alloc")) << c.err();
  EXPECT_EQ(MEMRA_E_INVALID, c.vt->buf_alloc(c.be, 1, nullptr));
}
