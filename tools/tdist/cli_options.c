/* SPDX-License-Identifier: Apache-2.0
 * The options of every tdist subcommand (tools layer); see cli_options.h. */
#include "cli_options.h"

#define TD_N(a) (sizeof(a) / sizeof((a)[0]))

static const char *const run_valued[] = {"--ranks", "--iters", "--rounds", "--seed", "--chunks", "--tile-rows",
                                         "--compute-workers", "--comm-workers", "--backend", "--dims", "--trace",
                                         "--json", "--input"};
static const char *const run_flags[] = {"--check", "--no-baseline", "--help"};
const td_cli_options td_cli_options_run = {"run", run_valued, TD_N(run_valued), run_flags, TD_N(run_flags), NULL, 0};

static const char *const explain_valued[] = {"--ranks", "--chunks", "--tile-rows", "--backend", "--dims", "--dump"};
static const char *const explain_flags[] = {"--sequential", "--help"};
const td_cli_options td_cli_options_explain = {"explain", explain_valued, TD_N(explain_valued), explain_flags,
                                               TD_N(explain_flags), NULL, 0};

static const char *const coll_valued[] = {"--ranks", "--min", "--max", "--iters", "--repeat", "--json", "--op"};
static const char *const coll_flags[] = {"--staged", "--no-mpi", "--help"};
const td_cli_options td_cli_options_bench_coll = {"bench coll", coll_valued, TD_N(coll_valued), coll_flags,
                                                  TD_N(coll_flags), NULL, 0};

static const char *const exec_valued[] = {"--json", "--size", "--m", "--n", "--k", "--tiles", "--workers", "--iters",
                                          "--micro"};
static const char *const exec_flags[] = {"--help"};
const td_cli_options td_cli_options_bench_exec = {"bench exec", exec_valued, TD_N(exec_valued), exec_flags,
                                                  TD_N(exec_flags), NULL, 0};

static const char *const ops_valued[] = {"--ranks", "--iters", "--warmup", "--chunks", "--compute-workers",
                                         "--comm-workers", "--backend", "--json", "--dtype", "--variants", "--models",
                                         "--m", "--sizes", "--shape"};
static const char *const ops_flags[] = {"--help"};
const td_cli_options td_cli_options_bench_ops = {"bench ag_gemm", ops_valued, TD_N(ops_valued), ops_flags,
                                                 TD_N(ops_flags), NULL, 0};

static const char *const tune_valued[] = {"--M", "--N", "--K", "--dtype", "--layout", "--arch", "--iters"};
static const char *const tune_flags[] = {"--no-store", "--help"};
static const char *const tune_aliases[] = {"-M", "-N", "-K"};
const td_cli_options td_cli_options_tune_gemm = {"tune gemm", tune_valued, TD_N(tune_valued), tune_flags,
                                                 TD_N(tune_flags), tune_aliases, TD_N(tune_aliases)};

static const char *const calibrate_flags[] = {"--quick", "--help"};
const td_cli_options td_cli_options_calibrate = {"calibrate", NULL, 0, calibrate_flags, TD_N(calibrate_flags), NULL,
                                                 0};

static const char *const doctor_flags[] = {"--help"};
const td_cli_options td_cli_options_doctor = {"doctor", NULL, 0, doctor_flags, TD_N(doctor_flags), NULL, 0};

const td_cli_options *td_cli_options_all(size_t *count) {
  static td_cli_options all[11];
  const td_cli_options *each[] = {&td_cli_options_run,        &td_cli_options_explain,   &td_cli_options_bench_coll,
                                  &td_cli_options_bench_exec, &td_cli_options_bench_ops, &td_cli_options_bench_ops,
                                  &td_cli_options_bench_ops,  &td_cli_options_bench_ops, &td_cli_options_tune_gemm,
                                  &td_cli_options_calibrate,  &td_cli_options_doctor};
  static const char *const names[] = {"run", "explain", "bench coll", "bench exec", "bench ag_gemm", "bench gemm_rs",
                                      "bench gemm_ar", "bench all_reduce", "tune gemm", "calibrate", "doctor"};
  for (size_t i = 0; i < TD_N(all); i++) {
    all[i] = *each[i];
    all[i].command = names[i];
  }
  *count = TD_N(all);
  return all;
}
