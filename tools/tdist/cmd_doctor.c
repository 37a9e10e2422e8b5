/* SPDX-License-Identifier: Apache-2.0
 * `tdist doctor`: the build, what this machine offers tdist (cores, free
 * space in /dev/shm for the shm transport's heaps, the BLAS, the GPUs and
 * driver when the CUDA backend is built), the configuration table with
 * current values, a check that each variable set in the environment parses
 * (exit status 1 if one does not), and the TD_* variables that are not in the
 * table (typos). Also lists /dev/shm/tdist-* objects whose creator is dead
 * (left by a job killed before its rank 0 removed the name; the transport
 * replaces such an object only when a job of the same id starts again).
 * stdout is line-buffered and flushed before each stderr line, so
 * `tdist doctor 2>&1` never splits a line. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#if defined(TD_HAVE_GEMM_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "commands.h"
#include "tdist/tdist.h"
#include "transport/transport.h"

char *openblas_get_config(void);

static void td__doctor_machine(void) {
  printf("\nmachine:\n");
  printf("  cores online          %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
  struct statvfs v;
  if (statvfs("/dev/shm", &v) == 0)
    printf("  /dev/shm free         %.1f MiB (the shm transport maps every rank's symmetric heap there)\n",
           (double)v.f_bavail * (double)v.f_frsize / 1048576.0);
  else
    printf("  /dev/shm              not available: launched ranks (tdrun) cannot use the shm transport\n");
  printf("  BLAS                  %s\n", openblas_get_config());
#if defined(TD_HAVE_GEMM_CUDA)
  int drv = 0, rt = 0, count = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  cudaError_t ce = cudaGetDeviceCount(&count);
  if (drv > 0)
    printf("  CUDA                  runtime %d.%d, driver %d.%d\n", rt / 1000, rt % 1000 / 10, drv / 1000,
           drv % 1000 / 10);
  else
    printf("  CUDA                  runtime %d.%d, no driver installed\n", rt / 1000, rt % 1000 / 10);
  if (ce != cudaSuccess) {
    printf("  GPUs                  none usable (%s): use --backend cpu\n", cudaGetErrorString(ce));
  } else {
    for (int d = 0; d < count; d++) {
      struct cudaDeviceProp p;
      if (cudaGetDeviceProperties(&p, d) == cudaSuccess)
        printf("  GPU %-2d                %s, compute capability %d.%d, %d SMs, %.1f GiB\n", d, p.name, p.major,
               p.minor, p.multiProcessorCount, (double)p.totalGlobalMem / 1073741824.0);
    }
  }
#else
  printf("  CUDA                  backend not built (configure with nvcc present for --backend cuda)\n");
#endif
}

/* /dev/shm/tdist-* objects whose creator pid is gone (or that never finished
 * initialising and are over a minute old): one line each with the remedy.
 * Read-only: a name may belong to a job starting right now, so doctor never
 * removes anything. Returns how many it listed. */
static int td__doctor_stale_shm(void) {
  DIR *d = opendir("/dev/shm");
  if (!d)
    return 0;
  int count = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, "tdist-", 6))
      continue;
    char name[300];
    snprintf(name, sizeof name, "/%s", e->d_name);
    int fd = shm_open(name, O_RDONLY, 0);
    if (fd < 0)
      continue;
    struct stat st;
    int32_t pid = 0;
    int stale = 0, ready = 0;
    int kind = td__region_kind(fd, e->d_name, &pid, &st); /* a foreign file named tdist-* is no region */
    ready = kind == TD__SHM_REGION;
    if (kind == TD__SHM_REGION)
      stale = td__creator_gone(pid);
    else if (kind == TD__SHM_HALF_MADE)
      stale = time(NULL) - st.st_mtime > 60 && (pid <= 0 || td__creator_gone(pid));
    close(fd);
    if (!stale)
      continue;
    if (!count++)
      printf("\nstale shared memory (its creator is gone; no tdist job uses it):\n");
    if (ready)
      printf("  /dev/shm/%s  %.1f MiB, creator pid %d is gone: remove it with rm /dev/shm/%s\n", e->d_name,
             (double)st.st_size / 1048576.0, (int)pid, e->d_name);
    else
      printf("  /dev/shm/%s  %.1f MiB, never finished initialising: remove it with rm /dev/shm/%s\n", e->d_name,
             (double)st.st_size / 1048576.0, e->d_name);
  }
  closedir(d);
  return count;
}

int td_cmd_doctor(int argc, char **argv) {
  /* Lines on stdout and stderr never interleave mid-line under 2>&1. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: tdist doctor\n  prints the build, what this machine has (cores, /dev/shm, BLAS, GPUs), every\n"
           "  configuration variable with its value, the set ones that do not parse (exit status 1)\n"
           "  and TD_* variables that tdist does not know (typos; a set TD_OPS_* one counts as a\n"
           "  problem too, exit status 1, since the operators and the other commands refuse it),\n"
           "  TD_CUDA_TARGET_NAME set without TD_CUDA_TARGET_SM (ignored), and stale /dev/shm/tdist-*\n"
           "  objects whose creator is gone\n");
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "tdist doctor: unexpected argument '%s' (doctor takes none; see tdist doctor --help)\n",
            argv[1]);
    return 2;
  }
  printf("tdist %s\n", td_version());
  td__doctor_machine();
  printf("\nconfiguration variables:\n");
  td_config_dump(stdout);
  fflush(stdout);
  int bad = td_config_check_all(stderr);
  { /* the perf model's calibration file, read by run, explain and the operators */
    td_perf_model m;
    if (td_perf_model_load_checked(&m) != TD_OK) {
      fflush(stdout);
      fprintf(stderr, "%s\n", td_last_error());
      bad++;
    }
  }
  { /* the name only qualifies a target SM: alone, the compiler ignores it (gemm_target.c) */
    const char *nm = getenv("TD_CUDA_TARGET_NAME"), *sm = getenv("TD_CUDA_TARGET_SM");
    if (nm && *nm && !(sm && *sm))
      printf("\nnote: TD_CUDA_TARGET_NAME='%s' is ignored: it names the GPU whose tuning-cache entries a "
             "TD_CUDA_TARGET_SM target uses, and TD_CUDA_TARGET_SM is not set (set both, e.g. "
             "TD_CUDA_TARGET_SM=90)\n", nm);
  }
  if (td_config_unknown(NULL) > 0) {
    printf("\nunknown TD_ variables (tdist does not read them):\n");
    td_config_unknown(stdout);
  }
  /* A misspelt operator knob is more than a listed name: the operators and every other tdist command refuse
   * to start while one is set, so doctor must not say the configuration is fine (exit 0) either. */
  const int ops_typos = td_config_unknown_set("TD_OPS_");
  if (ops_typos) {
    fflush(stdout);
    fprintf(stderr, "%d unknown TD_OPS_* variable%s (listed above): the operators and tdist's other commands "
            "refuse to start while %s set\n", ops_typos, ops_typos == 1 ? "" : "s", ops_typos == 1 ? "it is" :
            "they are");
    bad += ops_typos;
  }
  td__doctor_stale_shm();
  fflush(stdout);
  if (bad)
    fprintf(stderr, "doctor: %d problem%s in the configuration (variables or calibration file)\n", bad,
            bad == 1 ? "" : "s");
  return bad ? 1 : 0;
}
