/* SPDX-License-Identifier: Apache-2.0
 * The `nccl` transport (primitives layer, transports): symmetric device
 * memory and LSA peer pointers from NCCL >= 2.28, turned into a plain
 * td_dev_ctx (tdist/device/nccl.h says what and why).
 *
 * Heap layout is the CUDA local transport's: [0, 4 KiB) reserved (barrier
 * epoch at 0, diagnostic lock at 64, barrier signal area at 512), then a bump
 * allocator. The LSA table is read once, at creation, by td__nccl_lsa_bases
 * (the only code here that includes nccl_device.h), so nothing downstream
 * depends on NCCL's device headers, which NVRTC cannot compile. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "core/error.h"
}
#include "tdist/device/nccl.h"
#include "tdist/rma.h"
#include "tdist/symm.h"

extern "C" {
/* prim/prim_internal.h (not includable from C++: stdatomic.h): counts this
 * communicator as a user of its team (kind TD__TEAM_USER_NCCL = 2), so
 * td_team_destroy refuses while it exists. */
void td__team_users_add(td_team *team, int kind, int delta);
}

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 28, 0)
#error "the nccl transport needs NCCL >= 2.28 (symmetric windows, device API)"
#endif

namespace {
enum { RESERVED = 4096, OFF_EPOCH = 0, OFF_LOCK = 64, OFF_BARRIER = 512 };
}

struct td_nccl {
  td_team *team;
  int device;
  ncclComm_t comm;
  ncclWindow_t win;
  ncclDevComm_t dev_comm;
  int have_win, have_dev_comm;
  int team_user; /* 1 once counted as a user of the team (td__team_users_add) */
  void *heap;
  size_t heap_size, next;
  td_dev_diagnostic *diag, *diag_dev;
  td_dev_ctx ctx;
};

/* Heap base of every LSA peer (index = LSA rank), read from the window. */
__global__ void td__nccl_lsa_bases(ncclWindow_t win, int nlsa, uintptr_t *out) {
  for (int p = threadIdx.x; p < nlsa; p += blockDim.x)
    out[p] = (uintptr_t)ncclGetLsaPointer(win, 0, p);
}

static td_status nccl_fail(ncclResult_t r, const char *call) {
  return td__error(TD_ERR_NCCL, "td_nccl_create: %s failed: %s (%s)", call, ncclGetErrorString(r),
                   ncclGetLastError(NULL));
}
static td_status cuda_fail(cudaError_t e, const char *call) {
  return td__error(TD_ERR_CUDA, "td_nccl_create: %s failed: %s", call, cudaGetErrorString(e));
}

/* Every rank posts (its device worked, its GPU's UUID) through the heap, so
 * a rank whose device failed fails the whole team at once instead of leaving
 * it to hang, and two ranks on one GPU (which NCCL would refuse obscurely)
 * are named. */
static td_status check_devices(td_team *team, int device, int cuda_ok) {
  unsigned char mine[24];
  memset(mine, 0, sizeof mine);
  mine[16] = (unsigned char)cuda_ok;
  if (cuda_ok) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) == cudaSuccess)
      memcpy(mine, prop.uuid.bytes, 16);
    else
      mine[16] = 0;
  }
  const int n = td_team_size(team), me = td_team_rank(team);
  unsigned char *all = NULL;
  TD_CHECK(td_symm_alloc(team, (size_t)n * sizeof mine, 64, (void **)&all));
  td_status st = TD_OK;
  for (int p = 0; p < n && st == TD_OK; p++)
    st = td_putmem(team, all + (size_t)me * sizeof mine, mine, sizeof mine, p);
  if (st == TD_OK)
    st = td_team_barrier(team);
  for (int p = 0; p < n && st == TD_OK; p++) {
    const unsigned char *theirs = all + (size_t)p * sizeof mine;
    if (!theirs[16])
      st = td__error(TD_ERR_CUDA, "td_nccl_create: rank %d could not use its CUDA device%s", p,
                     p == me ? " (see cudaSetDevice / cudaGetDeviceProperties)" : "");
    else if (p != me && mine[16] && memcmp(theirs, mine, 16) == 0)
      st = td__error(TD_ERR_UNSUPPORTED,
                     "td_nccl_create: ranks %d and %d use the same GPU; NCCL refuses two ranks "
                     "of one communicator on one GPU: use the CUDA local transport "
                     "(tdist/device/cuda_local.h) for ranks sharing a GPU",
                     me < p ? me : p, me < p ? p : me);
  }
  td_status fst = td_symm_free(team, all);
  return st != TD_OK ? st : fst;
}

static td_status build(td_nccl *nc, int timeout_ms) {
  const int n = td_team_size(nc->team), me = td_team_rank(nc->team);
  cudaError_t e;
  ncclResult_t r;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (me == 0 && (r = ncclGetUniqueId(&id)) != ncclSuccess)
    nccl_fail(r, "ncclGetUniqueId"); /* the broadcast still runs; init then fails on all */
  TD_CHECK(td__nccl_bcast_bytes(nc->team, 0, &id, sizeof id));
  if ((r = ncclCommInitRank(&nc->comm, n, id, me)) != ncclSuccess)
    return nccl_fail(r, "ncclCommInitRank");
  if ((r = ncclMemAlloc(&nc->heap, nc->heap_size)) != ncclSuccess)
    return nccl_fail(r, "ncclMemAlloc");
  if ((e = cudaMemset(nc->heap, 0, nc->heap_size)) != cudaSuccess)
    return cuda_fail(e, "cudaMemset");
  if ((r = ncclCommWindowRegister(nc->comm, nc->heap, nc->heap_size, &nc->win,
                                  NCCL_WIN_COLL_SYMMETRIC)) != ncclSuccess)
    return nccl_fail(r, "ncclCommWindowRegister");
  nc->have_win = 1;
  ncclDevCommRequirements_t req;
  memset(&req, 0, sizeof req);
  if ((r = ncclDevCommCreate(nc->comm, &req, &nc->dev_comm)) != ncclSuccess)
    return nccl_fail(r, "ncclDevCommCreate");
  nc->have_dev_comm = 1;
  /* LSA peers and their heap bases. */
  ncclTeam_t lsa = ncclTeamLsa(nc->comm);
  uintptr_t *bases_dev = NULL, bases[TD_DEV_MAX_PEERS];
  if ((e = cudaMalloc((void **)&bases_dev, sizeof bases)) != cudaSuccess)
    return cuda_fail(e, "cudaMalloc");
  td__nccl_lsa_bases<<<1, 64>>>(nc->win, lsa.nRanks, bases_dev);
  e = cudaMemcpy(bases, bases_dev, (size_t)lsa.nRanks * sizeof(uintptr_t), cudaMemcpyDeviceToHost);
  cudaFree(bases_dev);
  if (e != cudaSuccess)
    return cuda_fail(e, "the LSA pointer kernel");
  if ((e = cudaHostAlloc((void **)&nc->diag, sizeof *nc->diag, cudaHostAllocMapped)) != cudaSuccess)
    return cuda_fail(e, "cudaHostAlloc");
  memset(nc->diag, 0, sizeof *nc->diag);
  if ((e = cudaHostGetDevicePointer((void **)&nc->diag_dev, nc->diag, 0)) != cudaSuccess)
    return cuda_fail(e, "cudaHostGetDevicePointer");
  td_dev_ctx *c = &nc->ctx;
  memset(c, 0, sizeof *c);
  c->rank = me;
  c->n_pes = n;
  c->world_rank = td_world_rank(td_team_world(nc->team));
  c->flags = TD_DEV_CTX_CUDA;
  c->heap_size = nc->heap_size;
  c->timeout_ns = (uint64_t)(timeout_ms ? timeout_ms : td_world_timeout_ms(td_team_world(nc->team))) * 1000000u;
  c->diag = nc->diag_dev;
  c->diag_lock = (uint32_t *)((char *)nc->heap + OFF_LOCK);
  c->barrier_sig = (uint64_t *)((char *)nc->heap + OFF_BARRIER);
  c->barrier_epoch = (uint64_t *)((char *)nc->heap + OFF_EPOCH);
  for (int p = 0; p < lsa.nRanks; p++) {
    const int world = ncclTeamRankToWorld(nc->comm, lsa, p);
    if (world >= 0 && world < n)
      c->peer_base[world] = bases[p];
  }
  c->peer_base[me] = (uintptr_t)nc->heap; /* always our own local address */
  return td_team_barrier(nc->team);
}

extern "C" td_status td_nccl_create(td_team *team, int device, size_t heap_size, int timeout_ms,
                                    td_nccl **out) {
  if (team == NULL || out == NULL)
    return td__error(TD_ERR_INVALID_ARG, "td_nccl_create: %s is NULL", team ? "out" : "team");
  if (device < 0)
    return td__error(TD_ERR_INVALID_ARG, "td_nccl_create: device %d is negative", device);
  if (heap_size != 0 && heap_size < 2 * RESERVED)
    return td__error(TD_ERR_INVALID_ARG,
                     "td_nccl_create: heap_size = %zu bytes; at least %d (or 0 for 64 MiB)",
                     heap_size, 2 * RESERVED);
  if (td_team_size(team) > TD_DEV_MAX_PEERS)
    return td__error(TD_ERR_INVALID_ARG, "td_nccl_create: team of %d ranks; at most %d",
                     td_team_size(team), TD_DEV_MAX_PEERS);
  if (timeout_ms < 0)
    return td__error(TD_ERR_INVALID_ARG, "td_nccl_create: timeout_ms = %d is negative", timeout_ms);
  /* From here on every rank takes part in the checks even if its device
   * failed, so a bad device fails the whole team instead of hanging it. */
  const int cuda_ok = cudaSetDevice(device) == cudaSuccess;
  td_status st = check_devices(team, device, cuda_ok);
  if (st != TD_OK)
    return st;
  td_nccl *nc = (td_nccl *)calloc(1, sizeof *nc);
  if (nc == NULL)
    return td__error(TD_ERR_NO_MEMORY, "td_nccl_create: out of host memory");
  nc->team = team;
  nc->device = device;
  nc->heap_size = heap_size ? heap_size : (size_t)64 << 20;
  nc->next = RESERVED;
  st = build(nc, timeout_ms);
  if (st != TD_OK) {
    td_nccl_destroy(nc);
    return st;
  }
  td__team_users_add(team, 2 /* TD__TEAM_USER_NCCL */, 1);
  nc->team_user = 1;
  *out = nc;
  return TD_OK;
}

extern "C" td_status td_nccl_destroy(td_nccl *nc) {
  if (nc == NULL)
    return TD_OK;
  cudaSetDevice(nc->device);
  cudaDeviceSynchronize();
  if (nc->have_dev_comm)
    ncclDevCommDestroy(nc->comm, &nc->dev_comm);
  if (nc->have_win)
    ncclCommWindowDeregister(nc->comm, nc->win);
  if (nc->heap)
    ncclMemFree(nc->heap);
  if (nc->comm)
    ncclCommDestroy(nc->comm);
  if (nc->diag)
    cudaFreeHost(nc->diag);
  if (nc->team_user)
    td__team_users_add(nc->team, 2 /* TD__TEAM_USER_NCCL */, -1);
  free(nc);
  return TD_OK;
}

extern "C" td_status td_nccl_alloc(td_nccl *nc, size_t bytes, size_t align, size_t *offset) {
  if (nc == NULL || offset == NULL)
    return td__error(TD_ERR_INVALID_ARG, "td_nccl_alloc: %s is NULL", nc ? "offset" : "nc");
  if (align == 0)
    align = 256;
  if ((align & (align - 1)) != 0 || align > ((size_t)1 << 20))
    return td__error(TD_ERR_INVALID_ARG,
                     "td_nccl_alloc: align = %zu; allowed 0 or a power of two up to 1 MiB", align);
  size_t start = (nc->next + align - 1) & ~(align - 1);
  if (start > nc->heap_size || bytes > nc->heap_size - start)
    return td__error(TD_ERR_HEAP_EXHAUSTED, "td_nccl_alloc: %zu bytes requested, %zu free of %zu",
                     bytes, nc->heap_size - (nc->next < nc->heap_size ? nc->next : nc->heap_size),
                     nc->heap_size);
  nc->next = start + (bytes ? bytes : 1);
  *offset = start;
  return TD_OK;
}

extern "C" void *td_nccl_ptr(const td_nccl *nc, size_t offset) {
  return nc && offset < nc->heap_size ? (char *)nc->heap + offset : NULL;
}

extern "C" td_status td_nccl_ctx(const td_nccl *nc, td_dev_ctx *out) {
  if (nc == NULL || out == NULL)
    return td__error(TD_ERR_INVALID_ARG, "td_nccl_ctx: %s is NULL", nc ? "out" : "nc");
  *out = nc->ctx;
  return TD_OK;
}

extern "C" const td_dev_diagnostic *td_nccl_diagnostic(const td_nccl *nc) {
  return nc ? nc->diag : NULL;
}
