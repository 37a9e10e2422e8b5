/* SPDX-License-Identifier: Apache-2.0
 * Host side of the CUDA GEMM tile family (tiles layer, cuda backend): checks a
 * problem, finds the compiled kernel for a configuration, builds the TMA
 * tensor maps (cuTensorMapEncodeTiled through the runtime's driver entry
 * point, so nothing links libcuda directly), launches a persistent grid, and
 * turns a hook's timeout record into a td_status. The sm_80 kernels are
 * launched from here too (plain pointers, no tensor maps). */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern "C" {
#include "core/error.h" /* C declarations without their own extern "C" */
}
#include "gemm.h"
#include "gemm_sm90_registry.h"

/* The same 128-byte layout as CUtensorMap, as the kernels declare it. */
struct __align__(64) td__tensor_map {
  td__gemm_u64 opaque[16];
};
static_assert(sizeof(td__tensor_map) == sizeof(CUtensorMap), "tensor map size");

typedef unsigned short td__gemm_u16;

static PFN_cuTensorMapEncodeTiled_v12000 td__encode_ptr = NULL;
static pthread_once_t td__encode_once = PTHREAD_ONCE_INIT;

static void td__encode_lookup(void) {
  void *p = NULL;
  cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) ==
          cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    td__encode_ptr = (PFN_cuTensorMapEncodeTiled_v12000)p;
}

/* The driver's tensor-map encoder, looked up once per process. */
static PFN_cuTensorMapEncodeTiled_v12000 td__encode_fn(void) {
  pthread_once(&td__encode_once, td__encode_lookup);
  return td__encode_ptr;
}

/* A 2-D row-major [rows, cols] 16-bit tensor, box of box_cols x box_rows;
 * swizzle: 128-byte swizzle (the loads' operand layout for wgmma), else none
 * (BCAST's staged rows, row-major in shared memory). */
static td_status td__make_map(td__tensor_map *out, const void *base, int dtype, long long rows,
                              long long cols, int box_cols, int box_rows, const char *what, int swizzle = 1) {
  PFN_cuTensorMapEncodeTiled_v12000 enc = td__encode_fn();
  if (!enc)
    return td__error(TD_ERR_CUDA, "gemm: cuTensorMapEncodeTiled is not available from the driver");
  cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
  cuuint64_t strides[1] = {(cuuint64_t)cols * 2};
  cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
  cuuint32_t estr[2] = {1, 1};
  CUresult r = enc((CUtensorMap *)out,
                   dtype == TD_GEMM_DT_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                            : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                   2, (void *)base, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                   swizzle ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return td__error(TD_ERR_CUDA,
                     "gemm: cuTensorMapEncodeTiled failed (%d) for %s [%lld x %lld] at %p, box "
                     "%d x %d; the base must be 16-byte aligned",
                     (int)r, what, rows, cols, base, box_rows, box_cols);
  return TD_OK;
}

static const td__gemm_kernel_entry *td__find(int arch, const td_gemm_config *cfg, int dtype,
                                             int b_kn, unsigned hooks, int variant = 0) {
  int count = 0;
  const td__gemm_kernel_entry *tab;
  if (arch == 90)
    tab = b_kn ? td__gemm_sm90_kernels_kn(&count) : td__gemm_sm90_kernels_nk(&count);
  else
    tab = td__gemm_sm80_kernels(&count);
  for (int i = 0; i < count; i++) {
    const td__gemm_kernel_entry *e = &tab[i];
    if (e->bm == cfg->bm && e->bn == cfg->bn && e->bk == cfg->bk && e->stages == cfg->stages &&
        e->cluster == (cfg->cluster > 1 ? cfg->cluster : 1) &&
        e->group_m == cfg->group_m && e->dtype == dtype && e->b_kn == b_kn && e->hooks == hooks &&
        e->variant == variant)
      return e;
  }
  return NULL;
}

/* Per-kernel facts that cost driver calls, looked up once per process under a
 * lock (the kernels are few and fixed: a small table suffices). */
typedef struct td__prepared {
  const void *fn;
  int device;                /* attributes and occupancy are per device */
  int binary_version, slots; /* slots > 0: blocks per SM; < 0: -(clusters per GPU) */
} td__prepared;
static td__prepared td__prep[128];
static pthread_mutex_t td__prep_lock = PTHREAD_MUTEX_INITIALIZER;

static cudaError_t td__prepare_locked(const td__gemm_kernel_entry *e, td__prepared *out) {
  cudaError_t err = cudaFuncSetAttribute(e->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         e->smem_bytes);
  if (err != cudaSuccess)
    return err;
  cudaFuncAttributes fa;
  err = cudaFuncGetAttributes(&fa, e->fn);
  if (err != cudaSuccess)
    return err;
  int slots = 1;
  if (e->cluster > 1) {
    cudaLaunchConfig_t lc = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)e->cluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    lc.gridDim = dim3(e->cluster * 64);
    lc.blockDim = dim3(e->threads);
    lc.dynamicSmemBytes = (size_t)e->smem_bytes;
    lc.attrs = attr;
    lc.numAttrs = 1;
    int clusters = 0;
    err = cudaOccupancyMaxActiveClusters(&clusters, e->fn, &lc);
    if (err != cudaSuccess)
      return err;
    slots = -(clusters > 0 ? clusters : 1);
  } else if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&slots, e->fn, e->threads,
                                                           e->smem_bytes) != cudaSuccess ||
             slots < 1) {
    slots = 1;
  }
  out->fn = e->fn;
  cudaGetDevice(&out->device);
  out->binary_version = fa.binaryVersion;
  out->slots = slots;
  return cudaSuccess;
}

/* Fills *out with the kernel's facts, querying the driver on first use. */
static cudaError_t td__prepare(const td__gemm_kernel_entry *e, td__prepared *out) {
  cudaError_t err = cudaSuccess;
  int dev = 0;
  cudaGetDevice(&dev);
  pthread_mutex_lock(&td__prep_lock);
  int i = 0;
  while (i < 128 && td__prep[i].fn && (td__prep[i].fn != e->fn || td__prep[i].device != dev))
    i++;
  if (i < 128 && td__prep[i].fn == e->fn && td__prep[i].device == dev) {
    *out = td__prep[i];
  } else {
    err = td__prepare_locked(e, out);
    if (err == cudaSuccess && i < 128)
      td__prep[i] = *out;
  }
  pthread_mutex_unlock(&td__prep_lock);
  return err;
}

/* Blocks in the persistent grid: every co-resident slot (clusters of `cl`
 * blocks when clustered, capped at what the multiprocessors can hold), never
 * more than there are tile units. */
/* Room the launcher leaves between the kernels' work units and INT32_MAX:
 * more than any grid (the persistent loop steps w by gridDim.x past the
 * last unit; 65536 blocks would be 256 per SM on 256 SMs). */
#define TD__UNIT_HEADROOM 65536

static int td__grid_size(const td__prepared *prep, int sms, int cl, long long units) {
  long long slots = prep->slots < 0 ? -prep->slots : (long long)prep->slots * sms;
  if (cl > 1 && slots > sms / cl)
    slots = sms / cl;
  return (int)((units < slots ? units : slots) * cl);
}

/* The current device's SMs and major compute capability; *major = -1 when
 * there is no usable device (cudaGetDevice failed). */
static int td__sm_count(int *major) {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError(); /* not sticky: clear it for the caller's later calls */
    *major = -1;
    return 0;
  }
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, dev);
  return sms;
}

/* Whether two of `count` outputs of `bytes` each overlap (a tile's stores to
 * one would race with another's): sets *a < *b to the first such pair. */
static int td__outputs_overlap(void *const *dst, int count, size_t bytes, int *a, int *b) {
  for (int i = 0; i < count; i++)
    for (int j = i + 1; j < count; j++) {
      const uintptr_t x = (uintptr_t)dst[i], y = (uintptr_t)dst[j];
      if (bytes > 0 && (x < y ? y - x < bytes : x - y < bytes)) {
        *a = i, *b = j;
        return 1;
      }
    }
  return 0;
}

static td_status td__check(const td_gemm_problem *p, const td_gemm_config *cfg, unsigned flags,
                           const td_gemm_hooks *hooks) {
  if (!p || !cfg)
    return td__error(TD_ERR_INVALID_ARG, "gemm: problem and config must not be NULL");
  if (p->m < 0 || p->n < 0 || p->k < 1)
    return td__error(TD_ERR_INVALID_ARG,
                     "gemm: sizes M=%d N=%d K=%d are invalid; M, N >= 0 and K >= 1 are allowed",
                     p->m, p->n, p->k);
  if (p->dtype != TD_BF16 && p->dtype != TD_F16)
    return td__error(TD_ERR_INVALID_ARG, "gemm: dtype %s is not supported; use bf16 or f16",
                     td_dtype_name(p->dtype));
  if (p->b_layout != TD_GEMM_B_NK && p->b_layout != TD_GEMM_B_KN)
    return td__error(TD_ERR_INVALID_ARG,
                     "gemm: b_layout %d is invalid; use TD_GEMM_B_NK (0) or TD_GEMM_B_KN (1)",
                     p->b_layout);
  if (flags & ~TD_GEMM_HOOK_KNOWN)
    return td__error(TD_ERR_INVALID_ARG, "gemm: hook flags 0x%x name unknown hooks (known: 0x%x)",
                     flags, TD_GEMM_HOOK_KNOWN);
  if ((flags & TD_GEMM_HOOK_GATHER) && flags != TD_GEMM_HOOK_GATHER &&
      flags != (TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT))
    return td__error(TD_ERR_UNSUPPORTED, "gemm: hook flags 0x%x combine GATHER with other hooks; GATHER "
                     "(0x%x) runs alone or with NSPLIT (0x%x)", flags, TD_GEMM_HOOK_GATHER, TD_GEMM_HOOK_NSPLIT);
  if ((flags & TD_GEMM_HOOK_NSPLIT) && flags != (TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT))
    return td__error(TD_ERR_UNSUPPORTED, "gemm: hook flags 0x%x: NSPLIT (0x%x) runs with GATHER (0x%x) only "
                     "(through td__gemm_cuda_run_gather_cols)", flags, TD_GEMM_HOOK_NSPLIT, TD_GEMM_HOOK_GATHER);
  if ((flags & TD_GEMM_HOOK_KGATHER) && flags != TD_GEMM_HOOK_KGATHER &&
      flags != (TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_PUSH) && flags != (TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_BCAST))
    return td__error(TD_ERR_UNSUPPORTED, "gemm: hook flags 0x%x combine KGATHER with other hooks; KGATHER "
                     "(0x%x) runs alone or with PUSH (0x%x) or BCAST (0x%x)", flags, TD_GEMM_HOOK_KGATHER,
                     TD_GEMM_HOOK_PUSH, TD_GEMM_HOOK_BCAST);
  if ((flags & TD_GEMM_HOOK_BCAST) && (flags & ~(TD_GEMM_HOOK_BCAST | TD_GEMM_HOOK_KGATHER)))
    return td__error(TD_ERR_UNSUPPORTED, "gemm: hook flags 0x%x combine BCAST with hooks other than KGATHER; "
                     "BCAST (0x%x) stores every row to every destination, with KGATHER only (through "
                     "td__gemm_cuda_run_kgather)", flags, TD_GEMM_HOOK_BCAST);
  if (flags && !hooks)
    return td__error(TD_ERR_INVALID_ARG, "gemm: hook flags 0x%x given without a hooks description",
                     flags);
  if (flags && (hooks->scope & ~TD_GEMM_SCOPE_ALL))
    return td__error(TD_ERR_INVALID_ARG,
                     "gemm: hooks scope 0x%x has unknown bits; allowed: 0 (system scope), "
                     "TD_GEMM_SCOPE_WAIT_GPU (0x1), TD_GEMM_SCOPE_RAISE_GPU (0x2)",
                     hooks->scope);
  if (p->k % 8 != 0)
    return td__error(TD_ERR_SHAPE,
                     "gemm: K=%d is not a multiple of 8; rows of A%s must start on 16-byte "
                     "boundaries (pad K with zeros)",
                     p->k, p->b_layout == TD_GEMM_B_NK ? " and B" : "");
  if (p->b_layout == TD_GEMM_B_KN && p->n % 8 != 0)
    return td__error(TD_ERR_SHAPE,
                     "gemm: N=%d is not a multiple of 8, which B given as [K,N] needs (16-byte "
                     "rows); give B as [N,K] or pad N",
                     p->n);
  const unsigned in_place = TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_KGATHER; /* operands from source tables */
  if ((!p->a && !(flags & in_place)) || (!p->b && !(flags & (TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_NSPLIT))) ||
      (!p->c && !(flags & (TD_GEMM_HOOK_PUSH | TD_GEMM_HOOK_BCAST | TD_GEMM_HOOK_NSPLIT))))
    return td__error(TD_ERR_INVALID_ARG, "gemm: A, B and C (unless the PUSH, BCAST or NSPLIT hook) must be device "
                     "pointers, not NULL");
  if ((flags & TD_GEMM_HOOK_WAIT) && (!hooks->wait_signals || hooks->wait_rows < 1))
    return td__error(TD_ERR_INVALID_ARG, "gemm: the WAIT hook needs wait_signals and wait_rows >= 1");
  if ((flags & TD_GEMM_HOOK_RAISE) && (!hooks->raise_signals[0] || hooks->raise_rows < 1))
    return td__error(TD_ERR_INVALID_ARG, "gemm: the RAISE hook needs raise_signals[0] and raise_rows >= 1");
  if (flags & TD_GEMM_HOOK_PUSH) {
    const long long rpp = hooks->rows_per_peer, longs = hooks->push_long_peers;
    if (rpp < 1)
      return td__error(TD_ERR_INVALID_ARG, "gemm: the PUSH hook needs rows_per_peer >= 1");
    /* M is an int, so no split needs more; a larger value overflows M + rpp - 1 below and
     * push_long_peers x rpp here and in the kernel's row split (dst[0] unchecked, rows misrouted) */
    if (rpp > INT32_MAX)
      return td__error(TD_ERR_INVALID_ARG, "gemm: PUSH rows_per_peer=%lld; 1..%d are allowed (M is an int: "
                       "%d rows per peer give every row to dst[0])", rpp, INT32_MAX, INT32_MAX);
    if (longs < 0 || longs > TD_GEMM_MAX_PEERS)
      return td__error(TD_ERR_INVALID_ARG, "gemm: PUSH push_long_peers=%lld; 0..%d are allowed", longs,
                       TD_GEMM_MAX_PEERS);
    if (longs > 0 && (flags & TD_GEMM_HOOK_RAISE))
      return td__error(TD_ERR_UNSUPPORTED, "gemm: PUSH with push_long_peers=%lld cannot RAISE (its signals follow "
                       "rows_per_peer alone); use push_long_peers=0", longs);
    long long peers;
    if (longs == 0 || p->m <= longs * rpp) {
      peers = ((long long)p->m + rpp - 1) / rpp;
    } else {
      if (rpp < 2)
        return td__error(TD_ERR_INVALID_ARG, "gemm: PUSH with M=%d, rows_per_peer=1 and push_long_peers=%lld "
                         "leaves rows %lld.. without an owner (the peers past the long ones own 0 rows)",
                         p->m, longs, longs);
      peers = longs + ((long long)p->m - longs * rpp + rpp - 2) / (rpp - 1);
    }
    if (peers > TD_GEMM_MAX_PEERS)
      return td__error(TD_ERR_INVALID_ARG,
                       "gemm: PUSH with M=%d, rows_per_peer=%lld and push_long_peers=%lld needs %lld peers; at most "
                       "%d", p->m, rpp, longs, peers, TD_GEMM_MAX_PEERS);
    for (long long i = 0; i < peers; i++)
      if (!hooks->dst[i] || ((flags & TD_GEMM_HOOK_RAISE) && !hooks->raise_signals[i]))
        return td__error(TD_ERR_INVALID_ARG, "gemm: PUSH needs dst[%lld]%s for the rows it owns",
                         i, (flags & TD_GEMM_HOOK_RAISE) ? " and raise_signals[i]" : "");
  }
  if (flags & TD_GEMM_HOOK_BCAST) {
    if (hooks->bcast_peers < 1 || hooks->bcast_peers > TD_GEMM_MAX_PEERS)
      return td__error(TD_ERR_INVALID_ARG, "gemm: BCAST bcast_peers=%d; 1..%d are allowed", hooks->bcast_peers,
                       TD_GEMM_MAX_PEERS);
    if (hooks->bcast_hint != 0 && hooks->bcast_hint != 1)
      return td__error(TD_ERR_INVALID_ARG, "gemm: BCAST bcast_hint=%d; 0 (plain stores) or 1 (L2 evict-first) "
                       "are allowed", hooks->bcast_hint);
    if (hooks->bcast_defer < 0 || hooks->bcast_defer > 2)
      return td__error(TD_ERR_INVALID_ARG, "gemm: BCAST bcast_defer=%d; 0 (second half staged in the epilogue), "
                       "1 (deferred into the next tile's main loop) or 2 (every copy paced over the next tile's "
                       "main loop) are allowed", hooks->bcast_defer);
    if (hooks->bcast_pace_kb < 0 || hooks->bcast_pace_kb > TD_GEMM_PACE_KB_MAX)
      return td__error(TD_ERR_INVALID_ARG, "gemm: BCAST bcast_pace_kb=%d; 0 (the default, %d) or 1..%d k-blocks "
                       "between two paced copies are allowed", hooks->bcast_pace_kb, TD_GEMM_PACE_KB_DEFAULT,
                       TD_GEMM_PACE_KB_MAX);
    for (int i = 0; i < hooks->bcast_peers; i++)
      if (!hooks->dst[i])
        return td__error(TD_ERR_INVALID_ARG, "gemm: BCAST needs dst[%d] (bcast_peers=%d)", i, hooks->bcast_peers);
    int a = 0, b = 0;
    if (td__outputs_overlap((void *const *)hooks->dst, hooks->bcast_peers, (size_t)p->m * (size_t)p->n * 2, &a, &b))
      return td__error(TD_ERR_INVALID_ARG, "gemm: BCAST destinations dst[%d] and dst[%d] overlap (each holds M x N = "
                       "%d x %d elements); give every destination its own buffer", a, b, p->m, p->n);
  }
  if (cfg->split_k > 1 && flags)
    return td__error(TD_ERR_UNSUPPORTED, "gemm: split_k=%d cannot be combined with hooks",
                     cfg->split_k);
  return TD_OK;
}

static void td__list_configs(char *buf, size_t cap, int arch, int dtype, int b_kn, unsigned hooks) {
  int count = 0;
  const td__gemm_kernel_entry *tab =
      arch == 90 ? (b_kn ? td__gemm_sm90_kernels_kn(&count) : td__gemm_sm90_kernels_nk(&count))
                 : td__gemm_sm80_kernels(&count);
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < count && used + 40 < cap; i++)
    if (tab[i].dtype == dtype && tab[i].hooks == hooks && tab[i].b_kn == b_kn && !tab[i].variant)
      used += (size_t)snprintf(buf + used, cap - used, "%s%dx%dx%d/s%d/g%d/c%d", used ? ", " : "",
                               tab[i].bm, tab[i].bn, tab[i].bk, tab[i].stages, tab[i].group_m,
                               tab[i].cluster);
}

extern "C" size_t td__gemm_cuda_workspace_size(const td_gemm_problem *p, const td_gemm_config *cfg) {
  (void)p;
  (void)cfg;
  return 0; /* split-K is not compiled into this build yet */
}

/* The source table of a GATHER / KGATHER launch: `count` maps copied to the
 * device table on the launch's stream, so they land before the kernel that
 * reads them and after the previous launch that read the table. */
static td_status td__upload_maps(const td__tensor_map *maps, int count, const void *table, void *stream,
                                 const char *hook) {
  cudaError_t err = cudaMemcpyAsync((void *)table, maps, (size_t)count * sizeof maps[0], cudaMemcpyHostToDevice,
                                    (cudaStream_t)stream);
  if (err != cudaSuccess)
    return td__error(TD_ERR_CUDA, "gemm: uploading %d %s tensor maps failed: %s", count, hook,
                     cudaGetErrorString(err));
  return TD_OK;
}

/* The inputs a GATHER / KGATHER table's maps are encoded from (see
 * td_gemm_map_cache): the words that size and box every map, then each map's
 * base; words past `count` bases stay zero. */
static void td__map_key(long long key[TD_GEMM_MAP_KEY_WORDS], const td__gemm_kernel_entry *e, unsigned flags,
                        int dtype, int m, int n, int k, const td_gemm_hooks *h, int sources, int count,
                        const void *const *bases) {
  memset(key, 0, TD_GEMM_MAP_KEY_WORDS * sizeof key[0]);
  const long long head[] = {(long long)flags, dtype, m, n, k, h->a_rows, h->k_src, e->bm, e->bn, e->epi_cols,
                            sources, count, (long long)(uintptr_t)h->a_maps};
  static_assert(sizeof head / sizeof head[0] <= TD_GEMM_MAP_KEY_WORDS - TD_GEMM_MAP_TABLE_MAX, "map key head");
  memcpy(key, head, sizeof head);
  for (int i = 0; i < count; i++)
    key[TD_GEMM_MAP_KEY_WORDS - TD_GEMM_MAP_TABLE_MAX + i] = (long long)(uintptr_t)bases[i];
}

/* A GATHER (A maps of every row source, then NSPLIT's B map of every column
 * source) or KGATHER (A maps, then B maps, then BCAST's C maps; box: one
 * consumer warpgroup's rows of a tile) table: encoded and uploaded in stream
 * order before the kernel that reads it, unless `mc` says the table already
 * holds these maps. Sets *ma and *mb to the kernel's own map arguments
 * (source 0's A and B; the kernel reads the table). */
static td_status td__gather_table(const td__gemm_kernel_entry *e, unsigned flags, int dtype, int m, int n, int k,
                                  const td_gemm_hooks *hp, const void *const *a_src, int sources,
                                  const void *const *b_src, void *stream, td_gemm_map_cache *mc,
                                  td__tensor_map *ma, td__tensor_map *mb) {
  const td_gemm_hooks &h = *hp;
  const int kg = (flags & TD_GEMM_HOOK_KGATHER) != 0;
  const int bmaps = kg ? sources : (flags & TD_GEMM_HOOK_NSPLIT) ? h.n_src : 0;
  const int cmaps = kg && (flags & TD_GEMM_HOOK_BCAST) ? h.bcast_peers : 0;
  const int count = sources + bmaps + cmaps, b0 = bmaps ? sources : 0;
  const void *bases[TD_GEMM_MAP_TABLE_MAX];
  for (int s = 0; s < sources; s++)
    bases[s] = a_src[s];
  for (int j = 0; j < bmaps; j++)
    bases[sources + j] = b_src[j];
  for (int o = 0; o < cmaps; o++)
    bases[sources + bmaps + o] = h.dst[o];
  long long key[TD_GEMM_MAP_KEY_WORDS];
  if (mc) {
    td__map_key(key, e, flags, dtype, m, n, k, &h, sources, count, bases);
    if (mc->valid && mc->count == count && !memcmp(mc->key, key, sizeof key)) {
      memcpy(ma, mc->maps[0], sizeof *ma);
      memcpy(mb, mc->maps[b0], sizeof *mb);
      mc->hits++;
      return TD_OK;
    }
    mc->valid = 0; /* until this table is uploaded */
  }
  td__tensor_map maps[TD_GEMM_MAP_TABLE_MAX];
  for (int s = 0; s < sources; s++) {
    if (kg)
      TD_CHECK(td__make_map(&maps[s], a_src[s], dtype, m, h.k_src, 64, e->bm, "A (a KGATHER source)"));
    else {
      long long r0 = (long long)s * h.a_rows, rows = m - r0 < h.a_rows ? m - r0 : h.a_rows;
      TD_CHECK(td__make_map(&maps[s], a_src[s], dtype, rows, k, 64, TD__GEMM_GATHER_ROWS(e->bm),
                            "A (a GATHER source)"));
    }
  }
  for (int j = 0; j < bmaps; j++)
    TD_CHECK(td__make_map(&maps[sources + j], b_src[j], dtype, kg ? h.k_src : k, n, 64, 64,
                          kg ? "B (a KGATHER source)" : "B (an NSPLIT column source)"));
  for (int o = 0; o < cmaps; o++)
    TD_CHECK(td__make_map(&maps[sources + bmaps + o], h.dst[o], dtype, m, n, e->epi_cols > 0 ? e->epi_cols : e->bn,
                          e->bm >= 128 ? e->bm / 2 : e->bm, "C (a BCAST destination)", 0));
  TD_CHECK(td__upload_maps(maps, count, h.a_maps, stream, kg ? "KGATHER" : bmaps ? "GATHER + NSPLIT" : "GATHER"));
  *ma = maps[0];
  *mb = maps[b0]; /* GATHER alone: unused (the kernel's B map is made by the caller) */
  if (mc) {
    memcpy(mc->maps, maps, (size_t)count * sizeof maps[0]);
    memcpy(mc->key, key, sizeof key);
    mc->count = count;
    mc->valid = 1;
    mc->uploads++;
  }
  return TD_OK;
}

/* td__gemm_cuda_run with the persistent grid sized for at most `sm_cap`
 * multiprocessors (0 = all of them). */
static td_status td__run(const td_gemm_problem *p, const td_gemm_config *cfg, unsigned flags,
                         const td_gemm_hooks *hooks, void *stream, int sm_cap,
                         const void *const *a_src = NULL, int sources = 0, const void *const *b_src = NULL) {
  if (cfg && cfg->arch == TD_GEMM_CUBLAS && flags) /* before the hooks' own checks: the engine is the problem */
    return td__error(TD_ERR_UNSUPPORTED, "gemm: hooks 0x%x asked of cuBLAS, which cannot wait or signal per "
                     "tile; use a compiled sm_90/sm_80 configuration", flags);
  TD_CHECK(td__check(p, cfg, flags, hooks));
  if ((flags & TD_GEMM_HOOK_NSPLIT) && !b_src) /* built by td__gemm_cuda_run_gather_cols only */
    return td__error(TD_ERR_INVALID_ARG, "gemm: the NSPLIT hook (0x%x) runs through td__gemm_cuda_run_gather_cols, "
                     "which builds the column sources' tensor maps", flags);
  if ((flags & TD_GEMM_HOOK_GATHER) && !a_src) /* the sources' maps are built by the GATHER entry point only */
    return td__error(TD_ERR_INVALID_ARG, "gemm: the GATHER hook (0x%x) runs through td__gemm_cuda_run_gather, "
                     "which builds the sources' tensor maps; td__gemm_cuda_run takes the other hooks", flags);
  if ((flags & (TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_BCAST)) && (!a_src || !b_src))
    return td__error(TD_ERR_INVALID_ARG, "gemm: the %s hook (0x%x) runs through td__gemm_cuda_run_kgather, "
                     "which builds the sources' (and BCAST's destinations') tensor maps; td__gemm_cuda_run takes "
                     "the other hooks", (flags & TD_GEMM_HOOK_KGATHER) ? "KGATHER" : "BCAST", flags);
  if (cfg->arch == TD_GEMM_CUBLAS) {
    if (sm_cap > 0)
      return td__error(TD_ERR_UNSUPPORTED, "gemm: cuBLAS cannot be limited to %d multiprocessors", sm_cap);
    return td__gemm_cublas_run(p, stream);
  }
  if (cfg->split_k > 1)
    return td__error(TD_ERR_UNSUPPORTED,
                     "gemm: split_k=%d is not compiled into this build; use 1", cfg->split_k);
  int dtype = p->dtype == TD_BF16 ? TD_GEMM_DT_BF16 : TD_GEMM_DT_F16;
  int b_kn = p->b_layout == TD_GEMM_B_KN;
  int arch = cfg->arch == TD_GEMM_SM90 ? 90 : 80;
  const td__gemm_kernel_entry *e = td__find(arch, cfg, dtype, b_kn, flags);
  if (e && (flags & TD_GEMM_HOOK_BCAST) && hooks->bcast_defer) { /* its deferred-half kernel, where one exists */
    const td__gemm_kernel_entry *d = td__find(arch, cfg, dtype, b_kn, flags, 1);
    if (d)
      e = d;
  }
  if (!e) {
    char list[1024];
    td__list_configs(list, sizeof list, arch, dtype, b_kn, flags);
    return td__error(TD_ERR_UNSUPPORTED,
                     "gemm: no sm_%d kernel compiled for %dx%dx%d stages=%d group_m=%d "
                     "cluster=%d dtype=%s B=%s hooks=0x%x; compiled: %s (others need the JIT)",
                     arch, cfg->bm, cfg->bn, cfg->bk, cfg->stages, cfg->group_m, cfg->cluster,
                     td_dtype_name(p->dtype), b_kn ? "[K,N]" : "[N,K]", flags,
                     list[0] ? list : "none");
  }
  {
    /* The kernels count tiles in int: M + BM - 1 and N + BN - 1 (and, with
     * NSPLIT, the tile units of every column source) must fit, or the counts
     * wrap (UB; no tile runs, or tiles run at wrong places); the units leave
     * TD__UNIT_HEADROOM below INT32_MAX for the persistent loop's last
     * `w += gridDim.x` step and the split tail's extra units. Before any CUDA call. */
    const long long tm = ((long long)p->m + e->bm - 1) / e->bm, tn = ((long long)p->n + e->bn - 1) / e->bn;
    const long long cols = (flags & TD_GEMM_HOOK_NSPLIT) ? hooks->n_src : 1;
    const int cl0 = e->cluster > 1 ? e->cluster : 1;
    if ((long long)p->m + e->bm - 1 > INT32_MAX || (long long)p->n + e->bn - 1 > INT32_MAX ||
        ((tm + cl0 - 1) / cl0) * tn * cols > INT32_MAX - TD__UNIT_HEADROOM)
      return td__error(TD_ERR_SHAPE, "gemm: M=%d N=%d%s with %dx%d tiles overflow the kernel's int tile counts "
                       "(M + BM - 1 and N + BN - 1 must be at most %d, the tiles%s at most %d); split the problem",
                       p->m, p->n, cols > 1 ? " (per column source)" : "", e->bm, e->bn, INT32_MAX,
                       cols > 1 ? " of every column source" : "", INT32_MAX - TD__UNIT_HEADROOM);
  }
  int major = 0, sms = td__sm_count(&major);
  if (sm_cap > 0 && sm_cap < sms)
    sms = sm_cap;
  if (major < 0)
    return td__error(TD_ERR_UNSUPPORTED, "gemm: no usable CUDA GPU (cudaGetDevice failed); the sm_%d kernels need "
                     "one of compute capability %d.x", arch, arch / 10);
  if (major * 10 < arch || (arch == 90 && major != 9))
    return td__error(TD_ERR_UNSUPPORTED,
                     "gemm: the sm_%d kernels need a GPU of compute capability %d.x; this one is %d.x",
                     arch, arch / 10, major);
  if (p->m == 0 || p->n == 0)
    return TD_OK;
  td_gemm_hooks h;
  if (hooks)
    h = *hooks;
  else
    memset(&h, 0, sizeof h);

  /* Persistent grid: one block (sm_90a) or as many as fit (sm_80) per
   * multiprocessor, never more blocks than tile units. */
  const int cl = e->cluster;
  long long tiles_m = ((long long)p->m + e->bm - 1) / e->bm, tiles_n = ((long long)p->n + e->bn - 1) / e->bn;
  if (flags & TD_GEMM_HOOK_NSPLIT) /* every column source's tiles */
    tiles_n *= h.n_src;
  long long units = ((tiles_m + cl - 1) / cl) * tiles_n; /* clusters' worth of tiles */
  td__prepared prep;
  cudaError_t err = td__prepare(e, &prep);
  if (err != cudaSuccess)
    return td__error(TD_ERR_CUDA, "gemm: cannot prepare the %dx%d sm_%d kernel: %s", e->bm, e->bn,
                     arch, cudaGetErrorString(err));
  if (arch == 90 && prep.binary_version < 90)
    return td__error(TD_ERR_UNSUPPORTED,
                     "gemm: this build has no sm_90a code for the kernel; configure with "
                     "CMAKE_CUDA_ARCHITECTURES including 90a");
  int grid = td__grid_size(&prep, sms, cl, units);
  h.split_tail = 0, h.split_k = 1;
  /* the last wave's tiles in K-slices, where it pays; a clustered GATHER kernel never splits (gemm_sm90.cuh,
   * SPLITS), so nothing is planned for it */
  const int may_split = (flags & TD_GEMM_HOOK_KGATHER) || ((flags & TD_GEMM_HOOK_GATHER) && cl == 1);
  if (may_split && h.split_ws) {
    td__gemm_split_plan_waves(units, td__grid_size(&prep, sms, cl, LLONG_MAX), (p->k + 63) / 64, h.split_ws_bytes,
                              (long long)e->bm * e->bn * 4, h.split_waves == 2 ? 2 : 1, &h.split_tail, &h.split_k);
    if (units + (long long)h.split_tail * (h.split_k - 1) > INT32_MAX - TD__UNIT_HEADROOM) /* int work units */
      h.split_tail = 0, h.split_k = 1;
    grid = td__grid_size(&prep, sms, cl, units - h.split_tail + (long long)h.split_tail * h.split_k);
  }
  td__gemm_u16 *c = (td__gemm_u16 *)p->c;
  int m = p->m, n = p->n, k = p->k;
  cudaLaunchConfig_t lc = {};
  cudaLaunchAttribute attr[1];
  lc.gridDim = dim3(grid);
  lc.blockDim = dim3(e->threads);
  lc.dynamicSmemBytes = (size_t)e->smem_bytes;
  lc.stream = (cudaStream_t)stream;
  if (cl > 1) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)cl;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    lc.attrs = attr;
    lc.numAttrs = 1;
  }
  td_gemm_map_cache *mc = (flags & (TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_KGATHER)) ? h.map_cache : NULL;
  if (arch == 90) {
    td__tensor_map ma, mb;
    if (flags & (TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_KGATHER))
      TD_CHECK(td__gather_table(e, flags, dtype, m, n, k, &h, a_src, sources, b_src, stream, mc, &ma, &mb));
    else {
      TD_CHECK(td__make_map(&ma, p->a, dtype, m, k, 64, e->bm, "A"));
    }
    if (flags & (TD_GEMM_HOOK_KGATHER | TD_GEMM_HOOK_NSPLIT)) {
      /* mb is source 0's B map, set above; the kernel reads the table */
    } else if (b_kn)
      TD_CHECK(td__make_map(&mb, p->b, dtype, k, n, 64, 64, "B[K,N]"));
    else
      TD_CHECK(td__make_map(&mb, p->b, dtype, n, k, 64, e->bn / cl, "B[N,K]"));
    void *args[] = {&ma, &mb, &c, &m, &n, &k, &h};
    err = cudaLaunchKernelExC(&lc, e->fn, args);
  } else {
    const td__gemm_u16 *a = (const td__gemm_u16 *)p->a, *b = (const td__gemm_u16 *)p->b;
    void *args[] = {&a, &b, &c, &m, &n, &k, &h};
    err = cudaLaunchKernelExC(&lc, e->fn, args);
  }
  if (err != cudaSuccess) {
    if (mc) /* the stream may not have run the upload: the next launch makes the table again */
      mc->valid = 0;
    return td__error(TD_ERR_CUDA, "gemm: launch of the %dx%d sm_%d kernel failed: %s", e->bm,
                     e->bn, arch, cudaGetErrorString(err));
  }
  return TD_OK;
}

extern "C" int td__gemm_cuda_configs(td_gemm_arch arch, td_dtype dtype, int b_layout,
                                     td_gemm_config *out, int cap) {
  int count = 0, n = 0;
  int a = arch == TD_GEMM_SM90 ? 90 : 80;
  int dt = dtype == TD_F16 ? TD_GEMM_DT_F16 : TD_GEMM_DT_BF16;
  const td__gemm_kernel_entry *tab =
      a == 90 ? (b_layout == TD_GEMM_B_KN ? td__gemm_sm90_kernels_kn(&count)
                                          : td__gemm_sm90_kernels_nk(&count))
              : td__gemm_sm80_kernels(&count);
  for (int i = 0; i < count; i++) {
    if (tab[i].hooks != 0 || tab[i].variant || tab[i].dtype != dt || tab[i].b_kn != (b_layout == TD_GEMM_B_KN))
      continue;
    if (out && n < cap) {
      td_gemm_config c = {arch,          tab[i].bm,      tab[i].bn, tab[i].bk,
                          tab[i].stages, tab[i].cluster, tab[i].group_m, 1};
      out[n] = c;
    }
    n++;
  }
  return n;
}

/* Rules of thumb from the H200 sweeps recorded in docs/gemm-notes.md: thin
 * tiles when M is small (every SM must stream B), BN that splits N into
 * nearly full waves for mid-size problems, 128x256 for large ones. */
extern "C" td_gemm_config td__gemm_cuda_default_config(td_gemm_arch arch, int m, int n, int k) {
  (void)k;
  if (arch == TD_GEMM_SM80) {
    td_gemm_config c = {TD_GEMM_SM80, 128, 128, 32, 4, 1, 8, 1};
    return c;
  }
  td_gemm_config c = {TD_GEMM_SM90, 128, 256, 64, 4, 1, 8, 1};
  if (m <= 256) {
    c.bm = 64;
    c.bn = 64;
    c.stages = 8;
  } else if (n <= 2048) {
    c.bn = 160;
    c.stages = 6;
  } else if (m <= 4096) {
    c.bn = 224;
    c.stages = 5;
  }
  return c;
}

extern "C" td_status td__gemm_cuda_run(const td_gemm_problem *p, const td_gemm_config *cfg,
                                       unsigned flags, const td_gemm_hooks *hooks, void *stream) {
  return td__run(p, cfg, flags, hooks, stream, 0);
}

/* The checks of GATHER's row sources, shared by both of its entry points. */
static td_status td__check_gather(const td_gemm_problem *p, const td_gemm_config *cfg, const void *const *a_src,
                                  int sources, long long src_rows, void *map_buf) {
  if (!p || !cfg)
    return td__error(TD_ERR_INVALID_ARG, "gemm: problem and config must not be NULL");
  if (cfg->arch != TD_GEMM_SM90)
    return td__error(TD_ERR_UNSUPPORTED, "gemm: the GATHER hook (A read in place from several sources) exists "
                     "for sm_90a configurations only, not %s", cfg->arch == TD_GEMM_CUBLAS ? "cuBLAS" : "sm_80");
  if (!a_src || !map_buf)
    return td__error(TD_ERR_INVALID_ARG, "gemm: GATHER needs the source table a_src and a device map_buf");
  if (src_rows < 1)
    return td__error(TD_ERR_INVALID_ARG, "gemm: GATHER src_rows=%lld; at least 1 row per source", src_rows);
  long long need = p->m > 0 ? (p->m - 1) / src_rows + 1 : 0; /* M + src_rows - 1 could wrap */
  if (sources != need || sources > TD_GEMM_MAX_SOURCES)
    return td__error(TD_ERR_INVALID_ARG, "gemm: GATHER with M=%d and src_rows=%lld needs %lld sources "
                     "(at most %d); %d given", p->m, src_rows, need, TD_GEMM_MAX_SOURCES, sources);
  if ((uintptr_t)map_buf % 64 != 0)
    return td__error(TD_ERR_INVALID_ARG, "gemm: GATHER map_buf %p is not 64-byte aligned (tensor maps are)",
                     map_buf);
  if (cfg->bm > 0 && src_rows % TD__GEMM_GATHER_ROWS(cfg->bm) != 0) /* BM < 1 names no kernel: refused with the list */
    return td__error(TD_ERR_SHAPE, "gemm: GATHER src_rows=%lld is not a multiple of %d (BM=%d loads %d-row parts), "
                     "so a load would straddle two sources; use a configuration whose part divides it", src_rows,
                     TD__GEMM_GATHER_ROWS(cfg->bm), cfg->bm, TD__GEMM_GATHER_ROWS(cfg->bm));
  for (int s = 0; s < sources; s++)
    if (!a_src[s])
      return td__error(TD_ERR_INVALID_ARG, "gemm: GATHER source %d of %d is NULL", s, sources);
  return TD_OK;
}

/* The in-place hooks that read B from sources (NSPLIT, KGATHER) read each as [K,N]. */
static td_status td__check_b_kn(const td_gemm_problem *p, const char *hook) {
  if (p->b_layout != TD_GEMM_B_KN)
    return td__error(TD_ERR_INVALID_ARG, "gemm: %s reads B as [K,N] sources (TD_GEMM_B_KN); b_layout %d given", hook,
                     p->b_layout);
  return TD_OK;
}

/* The split tail's fields of `tail` (NULL: no split), checked and copied
 * into h: the workspace and the waves to split; the launcher plans the rest. */
static td_status td__take_tail(const td_gemm_hooks *tail, const char *hook, td_gemm_hooks *h) {
  if (!tail)
    return TD_OK;
  if (tail->split_ws_bytes < 0 || (uintptr_t)tail->split_ws % 16 != 0)
    return td__error(TD_ERR_INVALID_ARG, "gemm: %s split_ws %p of %lld bytes; a 16-byte aligned workspace "
                     "of >= 0 bytes (or NULL: no split tail) is allowed", hook, tail->split_ws, tail->split_ws_bytes);
  if (tail->split_waves < 0 || tail->split_waves > 2)
    return td__error(TD_ERR_INVALID_ARG, "gemm: %s split_waves=%d; 0 or 1 (the last wave's tiles) or 2 (the "
                     "last two waves' where that pays) are allowed", hook, tail->split_waves);
  h->split_ws = tail->split_ws;
  h->split_ws_bytes = tail->split_ws ? tail->split_ws_bytes : 0;
  h->split_waves = tail->split_waves;
  return TD_OK;
}

/* GATHER's tail->map_fence (NULL: 0), checked and copied into h, with its
 * map_cache; KGATHER's `out` does not carry map_fence (its unused fields may
 * hold anything). */
static td_status td__take_map_fence(const td_gemm_hooks *tail, const char *hook, td_gemm_hooks *h) {
  if (!tail)
    return TD_OK;
  if (tail->map_fence != 0 && tail->map_fence != 1)
    return td__error(TD_ERR_INVALID_ARG, "gemm: %s map_fence=%d; 0 (each map fenced before each tile's first "
                     "load) or 1 (every map fenced once, at the start) are allowed", hook, tail->map_fence);
  h->map_fence = tail->map_fence;
  h->map_cache = tail->map_cache;
  return TD_OK;
}

extern "C" td_status td__gemm_cuda_run_gather(const td_gemm_problem *p, const td_gemm_config *cfg,
                                              const void *const *a_src, int sources, long long src_rows,
                                              void *map_buf, const td_gemm_hooks *tail, int sms, void *stream) {
  TD_CHECK(td__check_gather(p, cfg, a_src, sources, src_rows, map_buf));
  if (sms < 0)
    return td__error(TD_ERR_INVALID_ARG, "gemm: GATHER sms=%d; 0 (every multiprocessor) or a positive cap is "
                     "allowed", sms);
  td_gemm_hooks h;
  memset(&h, 0, sizeof h);
  TD_CHECK(td__take_tail(tail, "GATHER", &h));
  TD_CHECK(td__take_map_fence(tail, "GATHER", &h));
  h.a_maps = map_buf;
  h.a_rows = src_rows;
  return td__run(p, cfg, TD_GEMM_HOOK_GATHER, &h, stream, sms, a_src, sources);
}

extern "C" td_status td__gemm_cuda_run_gather_cols(const td_gemm_problem *p, const td_gemm_config *cfg,
                                                   const void *const *a_src, int sources, long long src_rows,
                                                   const void *const *b_src, void *const *c_dst, int col_srcs,
                                                   void *map_buf, const td_gemm_hooks *tail, void *stream) {
  TD_CHECK(td__check_gather(p, cfg, a_src, sources, src_rows, map_buf));
  if (!b_src || !c_dst)
    return td__error(TD_ERR_INVALID_ARG, "gemm: NSPLIT needs the column sources' tables b_src and c_dst");
  if (col_srcs < 1 || col_srcs > TD_GEMM_MAX_PEERS)
    return td__error(TD_ERR_INVALID_ARG, "gemm: NSPLIT col_srcs=%d; 1..%d are allowed", col_srcs,
                     TD_GEMM_MAX_PEERS);
  TD_CHECK(td__check_b_kn(p, "NSPLIT"));
  for (int j = 0; j < col_srcs; j++)
    if (!b_src[j] || !c_dst[j])
      return td__error(TD_ERR_INVALID_ARG, "gemm: NSPLIT column source %d of %d has a NULL %s", j, col_srcs,
                       !b_src[j] ? "B" : "C");
  int a = 0, b = 0;
  if (td__outputs_overlap(c_dst, col_srcs, (size_t)(p->m > 0 ? p->m : 0) * (size_t)(p->n > 0 ? p->n : 0) * 2, &a, &b))
    return td__error(TD_ERR_INVALID_ARG, "gemm: NSPLIT outputs c_dst[%d] and c_dst[%d] overlap (each holds M x N = "
                     "%d x %d elements); give every column source its own C", a, b, p->m, p->n);
  td_gemm_hooks h;
  memset(&h, 0, sizeof h);
  TD_CHECK(td__take_tail(tail, "NSPLIT", &h));
  TD_CHECK(td__take_map_fence(tail, "NSPLIT", &h));
  h.a_maps = map_buf;
  h.a_rows = src_rows;
  h.b_maps = (const char *)map_buf + (size_t)sources * TD_GEMM_MAP_BYTES;
  h.n_src = col_srcs;
  for (int j = 0; j < col_srcs; j++)
    h.dst[j] = c_dst[j];
  return td__run(p, cfg, TD_GEMM_HOOK_GATHER | TD_GEMM_HOOK_NSPLIT, &h, stream, 0, a_src, sources, b_src);
}

extern "C" td_status td__gemm_cuda_run_kgather(const td_gemm_problem *p, const td_gemm_config *cfg,
                                               const void *const *a_src, const void *const *b_src, int sources,
                                               long long k_src, void *map_buf, unsigned route,
                                               const td_gemm_hooks *out, void *stream) {
  if (!p || !cfg)
    return td__error(TD_ERR_INVALID_ARG, "gemm: problem and config must not be NULL");
  if (cfg->arch != TD_GEMM_SM90)
    return td__error(TD_ERR_UNSUPPORTED, "gemm: the KGATHER hook (K read in place from several sources) exists "
                     "for sm_90a configurations only, not %s", cfg->arch == TD_GEMM_CUBLAS ? "cuBLAS" : "sm_80");
  if (!a_src || !b_src || !map_buf)
    return td__error(TD_ERR_INVALID_ARG, "gemm: KGATHER needs the source tables a_src and b_src and a device "
                     "map_buf");
  if (sources < 1 || sources > TD_GEMM_MAX_SOURCES)
    return td__error(TD_ERR_INVALID_ARG, "gemm: KGATHER sources=%d; 1..%d are allowed", sources,
                     TD_GEMM_MAX_SOURCES);
  TD_CHECK(td__check_b_kn(p, "KGATHER"));
  if (k_src < 1 || k_src % 64 != 0)
    return td__error(TD_ERR_SHAPE, "gemm: KGATHER k_src=%lld is not a positive multiple of 64 (BK), so a k-block "
                     "would straddle two sources", k_src);
  if (k_src > INT32_MAX / sources) /* before the product, which could wrap onto K */
    return td__error(TD_ERR_INVALID_ARG, "gemm: KGATHER with %d sources of k_src=%lld needs K above %d; K=%d given",
                     sources, k_src, INT32_MAX, p->k);
  if ((long long)p->k != k_src * sources)
    return td__error(TD_ERR_INVALID_ARG, "gemm: KGATHER with %d sources of k_src=%lld needs K=%lld; K=%d given",
                     sources, k_src, k_src * sources, p->k);
  if ((uintptr_t)map_buf % 64 != 0)
    return td__error(TD_ERR_INVALID_ARG, "gemm: KGATHER map_buf %p is not 64-byte aligned (tensor maps are)",
                     map_buf);
  for (int s = 0; s < sources; s++)
    if (!a_src[s] || !b_src[s])
      return td__error(TD_ERR_INVALID_ARG, "gemm: KGATHER source %d of %d has a NULL %s", s, sources,
                       !a_src[s] ? "A" : "B");
  if (route != 0 && route != TD_GEMM_HOOK_PUSH && route != TD_GEMM_HOOK_BCAST)
    return td__error(TD_ERR_INVALID_ARG, "gemm: KGATHER route 0x%x; 0 (C), TD_GEMM_HOOK_PUSH (0x%x) or "
                     "TD_GEMM_HOOK_BCAST (0x%x) are allowed", route, TD_GEMM_HOOK_PUSH, TD_GEMM_HOOK_BCAST);
  if (route && !out)
    return td__error(TD_ERR_INVALID_ARG, "gemm: KGATHER route 0x%x needs its destinations (out is NULL)", route);
  td_gemm_hooks h;
  memset(&h, 0, sizeof h);
  TD_CHECK(td__take_tail(out, "KGATHER", &h)); /* the split tail's workspace (the launcher plans the split itself) */
  if (out)
    h.map_cache = out->map_cache;
  if (route) { /* the routing fields alone: the rest of *out is not the caller's to set here */
    memcpy(h.dst, out->dst, sizeof h.dst);
    h.rows_per_peer = out->rows_per_peer;
    h.push_long_peers = out->push_long_peers;
    h.bcast_peers = out->bcast_peers;
    h.bcast_hint = out->bcast_hint;
    h.bcast_defer = out->bcast_defer;
    h.bcast_pace_kb = out->bcast_pace_kb;
  }
  h.a_maps = map_buf;
  h.b_maps = (const char *)map_buf + (size_t)sources * TD_GEMM_MAP_BYTES;
  h.c_maps = (const char *)map_buf + 2 * (size_t)sources * TD_GEMM_MAP_BYTES;
  h.k_src = k_src;
  return td__run(p, cfg, TD_GEMM_HOOK_KGATHER | route, &h, stream, 0, a_src, sources, b_src);
}

extern "C" void td__gemm_split_plan(long long units, int slots, int nk, long long ws_bytes, long long tile_bytes,
                                    int *tail, int *split) {
  *tail = 0, *split = 1;
  if (units < 1 || slots < 1 || nk < 1 || tile_bytes < 1)
    return;
  const long long rem = units % slots; /* the last wave's tiles (all of them when units < slots) */
  if (rem == 0 || rem > TD_GEMM_SPLIT_CNT_BYTES / 4)
    return;
  long long s = slots / rem; /* slices that still fit one wave */
  if (s > TD_GEMM_SPLIT_MAX)
    s = TD_GEMM_SPLIT_MAX;
  if (s > nk / TD_GEMM_SPLIT_MIN_KB)
    s = nk / TD_GEMM_SPLIT_MIN_KB;
  if (ws_bytes < TD_GEMM_SPLIT_CNT_BYTES)
    return;
  const long long fit = (ws_bytes - TD_GEMM_SPLIT_CNT_BYTES) / tile_bytes; /* partial tiles the workspace holds */
  while (s >= 2 && rem * s > fit) /* rem * s <= 1024 * 8: no overflow, unlike rem * s * tile_bytes */
    s--;
  if (s < 2)
    return;
  *tail = (int)rem, *split = (int)s;
}

extern "C" void td__gemm_split_plan_waves(long long units, int slots, int nk, long long ws_bytes, long long tile_bytes,
                                          int waves, int *tail, int *split) {
  td__gemm_split_plan(units, slots, nk, ws_bytes, tile_bytes, tail, split);
  if (waves != 2 || units < 1 || slots < 1 || nk < 1 || tile_bytes < 1 || ws_bytes < TD_GEMM_SPLIT_CNT_BYTES)
    return;
  const long long full = units / slots, rem = units % slots, tail2 = rem + slots;
  if (rem == 0 || full < 1 || tail2 > TD_GEMM_SPLIT_CNT_BYTES / 4)
    return;
  /* cost in tile-times: full waves, then the split units' rounds of 1/s of a tile, plus a margin per slice for
   * the fix-up (the partial's store and the winner's reads), so a tie keeps fewer slices and less workspace;
   * the two-wave plan must gain a tenth of a tile-time, since its workspace is up to 2 * slots * 8 partial
   * tiles (~250 MiB of 128x256 on 132 SMs), not worth a marginal gain */
  const double margin = 0.01, min_gain = 0.1;
  double best = *tail > 0 ? (double)full + 1.0 / *split + margin * *split : (double)full + 1;
  const long long fit = (ws_bytes - TD_GEMM_SPLIT_CNT_BYTES) / tile_bytes;
  for (long long s = 2; s <= TD_GEMM_SPLIT_MAX && s <= nk / TD_GEMM_SPLIT_MIN_KB; s++) {
    if (tail2 * s > fit) /* tail2 * s <= 1024 * 8 */
      break;
    const long long rounds = (tail2 * s + slots - 1) / slots;
    const double cost = (double)(full - 1) + (double)rounds / (double)s + margin * (double)s;
    if (cost < best - min_gain)
      best = cost + min_gain, *tail = (int)tail2, *split = (int)s; /* a later s must beat this one outright */
  }
}

extern "C" int td__gemm_cuda_has_variant(const td_gemm_config *cfg, td_dtype dtype, int b_layout, unsigned hooks,
                                         int variant) {
  if (!cfg || cfg->arch != TD_GEMM_SM90 || variant != 1 || (dtype != TD_BF16 && dtype != TD_F16))
    return 0;
  return td__find(90, cfg, dtype == TD_BF16 ? TD_GEMM_DT_BF16 : TD_GEMM_DT_F16, b_layout == TD_GEMM_B_KN, hooks,
                  variant) != NULL;
}

extern "C" int td__gemm_cuda_configs_hooked(td_dtype dtype, int b_layout, unsigned hooks, td_gemm_config *out,
                                           int cap) {
  int count = 0, n = 0;
  if (dtype != TD_F16 && dtype != TD_BF16)
    return 0; /* the tiles take 16-bit operands only */
  int dt = dtype == TD_F16 ? TD_GEMM_DT_F16 : TD_GEMM_DT_BF16;
  const td__gemm_kernel_entry *tab =
      b_layout == TD_GEMM_B_KN ? td__gemm_sm90_kernels_kn(&count) : td__gemm_sm90_kernels_nk(&count);
  for (int i = 0; i < count; i++) {
    if (tab[i].hooks != hooks || tab[i].variant || tab[i].dtype != dt)
      continue;
    if (out && n < cap) {
      td_gemm_config c = {TD_GEMM_SM90, tab[i].bm, tab[i].bn, tab[i].bk, tab[i].stages, tab[i].cluster,
                          tab[i].group_m, 1};
      out[n] = c;
    }
    n++;
  }
  return n;
}

extern "C" td_status td__gemm_cuda_run_sms(const td_gemm_problem *p, const td_gemm_config *cfg, int sms,
                                           void *stream) {
  if (sms < 0)
    return td__error(TD_ERR_INVALID_ARG, "gemm: sms=%d is negative; 0 (all) or a count is allowed", sms);
  return td__run(p, cfg, 0, NULL, stream, sms);
}

extern "C" td_status td__gemm_cuda_check_diag(const td__gemm_u64 *diag) {
  td__gemm_u64 rec[TD_GEMM_DIAG_WORDS];
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess)
    return td__error(TD_ERR_CUDA, "gemm: kernel failed: %s", cudaGetErrorString(err));
  if (!diag)
    return TD_OK;
  err = cudaMemcpy(rec, diag, sizeof rec, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess)
    return td__error(TD_ERR_CUDA, "gemm: reading the diagnostic record failed: %s",
                     cudaGetErrorString(err));
  if (rec[TD_GEMM_DIAG_FLAG])
    return td__error(TD_ERR_TIMEOUT,
                     "gemm: the tile starting at row %llu waited past its deadline on wait "
                     "signal %llu: expected >= %llu, observed %llu",
                     rec[TD_GEMM_DIAG_ROW], rec[TD_GEMM_DIAG_SIGNAL],
                     rec[TD_GEMM_DIAG_EXPECTED], rec[TD_GEMM_DIAG_OBSERVED]);
  return TD_OK;
}

extern "C" int td__gemm_cuda_grid(const td_gemm_problem *p, const td_gemm_config *cfg) {
  if (!p || !cfg || p->m <= 0 || p->n <= 0)
    return -1;
  int dtype = p->dtype == TD_BF16 ? TD_GEMM_DT_BF16 : TD_GEMM_DT_F16;
  int arch = cfg->arch == TD_GEMM_SM90 ? 90 : 80;
  const td__gemm_kernel_entry *e = td__find(arch, cfg, dtype, p->b_layout == TD_GEMM_B_KN, 0);
  td__prepared prep;
  if (!e || td__prepare(e, &prep) != cudaSuccess)
    return -1;
  int major = 0, sms = td__sm_count(&major);
  if (major < 0)
    return -1;
  long long tiles_m = ((long long)p->m + e->bm - 1) / e->bm, tiles_n = ((long long)p->n + e->bn - 1) / e->bn;
  long long units = ((tiles_m + e->cluster - 1) / e->cluster) * tiles_n;
  return td__grid_size(&prep, sms, e->cluster, units);
}
