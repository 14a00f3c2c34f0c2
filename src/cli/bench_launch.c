/* Launching benchmark children (`bench scaling`, `bench tta`): the child's
 * command line under mpiexec (with the flags scripts/mpirun-flags.sh would
 * add) or srun, running it with its output in a log file, and the log's last
 * lines when it fails. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

void bench_argv_add(bench_argv *v, const char *s)
{
    if (v->n < BENCH_MAX_ARGS - 1)
        v->argv[v->n++] = (char *)s;
    v->argv[v->n] = NULL;
}

void bench_argv_addf(bench_argv *v, const char *fmt, double x)
{
    if (v->nbuf < BENCH_MAX_NUMS) {
        snprintf(v->buf[v->nbuf], sizeof v->buf[0], fmt, x);
        bench_argv_add(v, v->buf[v->nbuf++]);
    }
}

/* Open MPI's mpiexec needs --allow-run-as-root as root and --oversubscribe
 * beyond the core count; MPICH's Hydra needs neither. */
static int is_open_mpi(const char *launcher)
{
    char cmd[600], line[256];
    snprintf(cmd, sizeof cmd, "'%s' --version 2>&1", launcher);
    FILE *p = strchr(launcher, '\'') ? NULL : popen(cmd, "r");
    int yes = 0;
    while (p && fgets(line, sizeof line, p))
        yes |= strstr(line, "Open MPI") || strstr(line, "OpenMPI") || strstr(line, "OpenRTE");
    if (p)
        pclose(p);
    return yes;
}

int bench_launcher_init(bench_launcher *l, const char *name, const char *extra)
{
    memset(l, 0, sizeof *l);
    ssize_t n = readlink("/proc/self/exe", l->self, sizeof l->self - 1);
    if (n <= 0)
        return -1;
    l->self[n] = 0;
    l->srun = !strcmp(name, "srun");
    const char *env = getenv("MPIEXEC");
    snprintf(l->mpiexec, sizeof l->mpiexec, "%s", env && *env ? env : "mpiexec");
    l->open_mpi = !l->srun && is_open_mpi(l->mpiexec);
    snprintf(l->extra, sizeof l->extra, "%s", extra ? extra : "");
    return 0;
}

void bench_launch_argv(bench_launcher *l, int np, bench_argv *v)
{
    bench_argv_add(v, l->srun ? "srun" : l->mpiexec);
    if (l->open_mpi && geteuid() == 0)
        bench_argv_add(v, "--allow-run-as-root");
    if (l->open_mpi && np > sysconf(_SC_NPROCESSORS_ONLN))
        bench_argv_add(v, "--oversubscribe");
    bench_argv_add(v, l->srun ? "-n" : "-np");
    bench_argv_addf(v, "%.0f", np);
    snprintf(l->split, sizeof l->split, "%s", l->extra); /* strtok writes into its copy */
    for (char *t = strtok(l->split, " \t"); t; t = strtok(NULL, " \t"))
        bench_argv_add(v, t);
    bench_argv_add(v, l->self);
}

int bench_spawn(char **argv, const char *log)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

void bench_tail_log(const char *log)
{
    FILE *f = fopen(log, "r");
    char line[512], last[3][512] = {"", "", ""};
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        snprintf(last[n++ % 3], sizeof last[0], "%s", line);
    for (int i = n > 3 ? n - 3 : 0; i < n; i++)
        fprintf(stderr, "  | %s", last[i % 3]);
    if (f)
        fclose(f);
}
