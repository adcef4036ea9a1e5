/* A fake CUDA driver (libcuda.so.1) for tests on machines without a GPU.
 *
 * It exports every entry point rpjrt-cuda and rpjrt's driver probe resolve. How it behaves
 * is chosen by the mode: the FAKE_MODE macro when it is compiled (-DFAKE_MODE="\"nullhost\""),
 * else the FAKECUDA_MODE environment variable, else "ok". fake_calls("cuEventSynchronize")
 * counts the calls made to an entry point, so a test can see that a wait happened.
 *
 * Modes: ok, nullhost, nulldev, nullctx, nullmod, nullfunc, nullstream, nullevent, nonul,
 * evfail1 (the first cuEventSynchronize fails), recordfail (cuEventRecord fails), slowev
 * (cuEventSynchronize takes 2 s), negver, negcount, initweird (cuInit fails with 12345),
 * inithang (cuInit never returns). Built by crates/rpjrt-cuda/tests/fake_driver.rs and
 * python/tests/test_attack_round23_cuda.py with the system C compiler (cc).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;

static const char *mode(void) {
#ifdef FAKE_MODE
    return FAKE_MODE;
#else
    const char *m = getenv("FAKECUDA_MODE");
    return m ? m : "ok";
#endif
}
static int is(const char *m) { return strcmp(mode(), m) == 0; }

/* Call counters, by entry point name. */
static const char *names[] = {"cuEventSynchronize", "cuCtxSynchronize", "cuEventRecord",
                              "cuMemFreeHost", "cuMemcpyDtoH", "cuLaunchKernel",
                              "cuDevicePrimaryCtxRelease"};
static int counts[sizeof names / sizeof names[0]];
static void count(const char *name) {
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i], name) == 0) __atomic_add_fetch(&counts[i], 1, __ATOMIC_SEQ_CST);
}
int fake_calls(const char *name) {
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i], name) == 0) return __atomic_load_n(&counts[i], __ATOMIC_SEQ_CST);
    return -1;
}

static char objs[64];

CUresult cuInit(unsigned f) {
    (void)f;
    if (is("inithang")) for (;;) sleep(1000);
    if (is("initweird")) return 12345;
    return 0;
}
CUresult cuDriverGetVersion(int *v) { *v = is("negver") ? -123456 : 13000; return 0; }
CUresult cuGetErrorName(CUresult c, const char **p) { (void)c; *p = "CUDA_ERROR_FAKE"; return 0; }
CUresult cuGetErrorString(CUresult c, const char **p) { (void)c; *p = "a fake error"; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = is("negcount") ? -5 : 1; return 0; }
CUresult cuDeviceGet(int *d, int o) { *d = o; return 0; }
CUresult cuDeviceGetName(char *b, int len, int d) {
    (void)d;
    if (is("nonul")) { memset(b, 'A', (size_t)len); return 0; }
    strncpy(b, "Fake GPU", (size_t)len);
    return 0;
}
CUresult cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = is("nullctx") ? NULL : objs; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; count("cuDevicePrimaryCtxRelease"); return 0; }
CUresult cuCtxSetCurrent(void *c) { (void)c; return 0; }
CUresult cuCtxSynchronize(void) { count("cuCtxSynchronize"); return 0; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = 1u << 30; *t = 1u << 31; return 0; }
static uint64_t next_ptr = 0x10000;
CUresult cuMemAlloc_v2(uint64_t *p, size_t n) {
    if (is("nulldev")) { *p = 0; return 0; }
    *p = __atomic_fetch_add(&next_ptr, (n + 255) & ~(uint64_t)255, __ATOMIC_SEQ_CST);
    return 0;
}
CUresult cuMemFree_v2(uint64_t p) { (void)p; return 0; }
CUresult cuMemAllocHost_v2(void **p, size_t n) {
    if (is("nullhost")) { *p = NULL; return 0; }
    *p = malloc(n ? n : 1);
    if (!*p) return 2;
    memset(*p, 0xAB, n); /* stale bytes, as a reused allocation would hold */
    return 0;
}
CUresult cuMemFreeHost(void *p) { count("cuMemFreeHost"); free(p); return 0; }
CUresult cuMemcpyHtoD_v2(uint64_t d, const void *s, size_t n) { (void)d; (void)s; (void)n; return 0; }
CUresult cuMemcpyDtoH_v2(void *d, uint64_t s, size_t n) { (void)s; count("cuMemcpyDtoH"); memset(d, 0x5A, n); return 0; }
CUresult cuMemcpyDtoD_v2(uint64_t d, uint64_t s, size_t n) { (void)d; (void)s; (void)n; return 0; }
CUresult cuMemcpyHtoDAsync_v2(uint64_t d, const void *s, size_t n, void *st) { (void)d; (void)s; (void)n; (void)st; return 0; }
CUresult cuMemcpyDtoHAsync_v2(void *d, uint64_t s, size_t n, void *st) { (void)s; (void)st; memset(d, 0x5A, n); return 0; }
CUresult cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, void *st) { (void)d; (void)s; (void)n; (void)st; return 0; }
CUresult cuMemsetD8_v2(uint64_t d, unsigned char v, size_t n) { (void)d; (void)v; (void)n; return 0; }
CUresult cuMemsetD8Async(uint64_t d, unsigned char v, size_t n, void *st) { (void)d; (void)v; (void)n; (void)st; return 0; }
CUresult cuModuleLoadData(void **m, const void *img) { (void)img; *m = is("nullmod") ? NULL : objs + 1; return 0; }
CUresult cuModuleUnload(void *m) { (void)m; return 0; }
CUresult cuModuleGetFunction(void **f, void *m, const char *n) { (void)m; (void)n; *f = is("nullfunc") ? NULL : objs + 2; return 0; }
CUresult cuLaunchKernel(void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned g,
                        unsigned sm, void *st, void **params, void **extra) {
    (void)f; (void)a; (void)b; (void)c; (void)d; (void)e; (void)g; (void)sm; (void)st; (void)params; (void)extra;
    count("cuLaunchKernel");
    return 0;
}
CUresult cuStreamCreate(void **s, unsigned f) { (void)f; *s = is("nullstream") ? NULL : objs + 3; return 0; }
CUresult cuStreamDestroy_v2(void *s) { (void)s; return 0; }
CUresult cuStreamSynchronize(void *s) { (void)s; return 0; }
CUresult cuStreamWaitEvent(void *s, void *e, unsigned f) { (void)s; (void)e; (void)f; return 0; }
CUresult cuEventCreate(void **e, unsigned f) { (void)f; *e = is("nullevent") ? NULL : objs + 4; return 0; }
CUresult cuEventDestroy_v2(void *e) { (void)e; return 0; }
CUresult cuEventRecord(void *e, void *s) {
    (void)e; (void)s;
    count("cuEventRecord");
    return is("recordfail") ? 700 : 0;
}
CUresult cuEventSynchronize(void *e) {
    (void)e;
    count("cuEventSynchronize");
    if (is("slowev")) sleep(2);
    if (is("evfail1") && fake_calls("cuEventSynchronize") == 1) return 700;
    return 0;
}
CUresult cuEventElapsedTime(float *ms, void *a, void *b) { (void)a; (void)b; *ms = 1.5f; return 0; }
