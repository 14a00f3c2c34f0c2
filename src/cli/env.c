/* Collects the benchmark environment: CPU model and count (/proc/cpuinfo),
 * kernel, host, UTC date, MPI library (MPI_Get_library_version through the
 * comm layer), oneDNN version, compiler and flags, scaleout version and git
 * commit, thread settings, the ISA the kernels run (after caps), the clock
 * and the FP32 and BF16 peaks that MFU divides by. Anything unavailable is
 * reported as such. */
#include "env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "scaleout/backend.h"
#include "scaleout/cpu.h"
#ifdef SCALEOUT_HAVE_MPI
#include "scaleout/comm.h"
#endif

#ifndef SCALEOUT_CC
#define SCALEOUT_CC "unknown"
#endif
#ifndef SCALEOUT_CFLAGS
#define SCALEOUT_CFLAGS "unknown"
#endif
#ifndef SCALEOUT_BUILD_TYPE
#define SCALEOUT_BUILD_TYPE "unknown"
#endif

static void cpuinfo(env_info *e)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(e->cpu_model, sizeof e->cpu_model, "unknown");
    e->cpu_logical = 0;
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!strncmp(line, "processor", 9))
            e->cpu_logical++;
        else if (colon && !strncmp(line, "model name", 10) && !strcmp(e->cpu_model, "unknown")) {
            colon += 1 + (colon[1] == ' ');
            colon[strcspn(colon, "\n")] = 0;
            snprintf(e->cpu_model, sizeof e->cpu_model, "%s", colon);
        }
    }
    if (f)
        fclose(f);
}

void env_collect(env_info *e)
{
    memset(e, 0, sizeof *e);
    if (gethostname(e->hostname, sizeof e->hostname - 1))
        snprintf(e->hostname, sizeof e->hostname, "unknown");
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(e->date, sizeof e->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    struct utsname u;
    if (!uname(&u))
        snprintf(e->kernel, sizeof e->kernel, "%s %s %s", u.sysname, u.release, u.machine);
    cpuinfo(e);
    e->cpu_online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(e->mpi, sizeof e->mpi, "none (built without MPI)");
#ifdef SCALEOUT_HAVE_MPI
    if (so_comm_library_version(e->mpi, sizeof e->mpi))
        snprintf(e->mpi, sizeof e->mpi, "unknown");
#endif
}

static void env_str(so_json *js, const char *key, const char *var)
{
    const char *v = getenv(var);
    if (v)
        so_json_str(js, key, v);
    else
        so_json_null(js, key);
}

void env_write_json(so_json *js, const env_info *e, int threads, int pin)
{
    so_json_obj_begin(js, "environment");
    so_json_str(js, "hostname", e->hostname);
    so_json_str(js, "date", e->date);
    so_json_str(js, "kernel", e->kernel);
    so_json_str(js, "cpu_model", e->cpu_model);
    so_json_str(js, "isa", so_isa_name(so_cpu_isa()));
    so_json_str(js, "isa_detected", so_isa_name(so_cpu_isa_detected()));
    if (so_cpu_isa_cap())
        so_json_str(js, "isa_cap", so_cpu_isa_cap());
    else
        so_json_null(js, "isa_cap");
    so_json_num(js, "cpu_clock_ghz", so_cpu_clock_ghz());
    so_json_num(js, "peak_gflops_per_core", so_cpu_peak_gflops());
    so_json_num(js, "fma_gflops_measured", so_cpu_fma_gflops());
    so_json_bool(js, "bf16", so_cpu_has_bf16());
    so_json_num(js, "bf16_peak_gflops_per_core", so_cpu_bf16_peak_gflops());
    so_json_num(js, "bf16_gflops_measured", so_cpu_bf16_gflops());
    so_json_int(js, "cpu_count", e->cpu_logical);
    so_json_int(js, "cpu_online", e->cpu_online);
    so_json_str(js, "mpi_library", e->mpi);
    so_json_str(js, "onednn", so_backend_version());
    so_json_str(js, "compiler", SCALEOUT_CC " (" __VERSION__ ")");
    so_json_str(js, "compiler_flags", SCALEOUT_CFLAGS);
    so_json_str(js, "build_type", SCALEOUT_BUILD_TYPE);
    so_json_str(js, "scaleout_version", SCALEOUT_VERSION);
    so_json_str(js, "git", cli_git_commit());
    so_json_obj_begin(js, "threads");
    so_json_int(js, "compute_threads", threads);
    so_json_bool(js, "pinned", pin);
    env_str(js, "OMP_NUM_THREADS", "OMP_NUM_THREADS");
    env_str(js, "OMP_PROC_BIND", "OMP_PROC_BIND");
    env_str(js, "OMP_PLACES", "OMP_PLACES");
    so_json_obj_end(js);
    so_json_obj_end(js);
}
