/* SPDX-License-Identifier: Apache-2.0
 * `tdist doctor`: the build, what this machine offers tdist (cores, free
 * space in /dev/shm for the shm transport's heaps, the BLAS, the GPUs and
 * driver when the CUDA backend is built), the configuration table with
 * current values, a check that each variable set in the environment parses
 * (exit status 1 if one does not), and the TD_* variables that are not in the
 * table (typos). */
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#if defined(TD_HAVE_GEMM_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "commands.h"
#include "tdist/tdist.h"

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

int td_cmd_doctor(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: tdist doctor\n  prints the build, what this machine has (cores, /dev/shm, BLAS, GPUs), every\n"
           "  configuration variable with its value, the set ones that do not parse (exit status 1)\n"
           "  and TD_* variables that tdist does not know (typos)\n");
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
  int bad = td_config_check_all(stderr);
  { /* the perf model's calibration file, read by run, explain and the operators */
    td_perf_model m;
    if (td_perf_model_load_checked(&m) != TD_OK) {
      fprintf(stderr, "%s\n", td_last_error());
      bad++;
    }
  }
  if (td_config_unknown(NULL) > 0) {
    printf("\nunknown TD_ variables (tdist does not read them):\n");
    td_config_unknown(stdout);
  }
  if (bad)
    fprintf(stderr, "doctor: %d problem%s in the configuration (variables or calibration file)\n", bad,
            bad == 1 ? "" : "s");
  return bad ? 1 : 0;
}
