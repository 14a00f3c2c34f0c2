/* SIGTERM -> checkpoint -> exit CLI_REQUEUE (stop.h). A signal may reach the
 * ranks at different steps (Slurm signals each task on its own), so the flag
 * is agreed by a one-value MAX allreduce at every step end, when the gradient
 * engine is idle; every rank then stops after the same step. */
#include "stop.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "scaleout/err.h"

static volatile sig_atomic_t term_seen;

static void on_term(int sig)
{
    (void)sig;
    term_seen = 1;
}

void stop_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* blocking reads and MPI's polling carry on */
    sigaction(SIGTERM, &sa, NULL);
}

struct stop_hook {
    so_train_hooks hooks;
    const so_train_hooks *prev;
    const so_dist *d;
    ckpt_glue *cg;
    long stopped_at;
};

static void hook_span(void *arg, so_span_kind kind, long step, int id, double t0, double t1)
{
    stop_hook *h = arg;
    h->prev->span(h->prev->arg, kind, step, id, t0, t1);
}

static int hook_before_update(void *arg)
{
    stop_hook *h = arg;
    return h->prev && h->prev->before_update ? h->prev->before_update(h->prev->arg) : 0;
}

/* The agreement comes first, so the checkpoint hook further down the chain
 * sees the request at this very step. */
static int hook_step_end(void *arg, const so_train_state *s)
{
    stop_hook *h = arg;
    double v = term_seen;
    if (h->d && h->d->world > 1) {
        int rc = h->d->max(h->d->ctx, &v, 1);
        if (rc)
            return rc;
    }
    if (v > 0)
        ckpt_glue_request(h->cg);
    int rc = h->prev && h->prev->step_end ? h->prev->step_end(h->prev->arg, s) : 0;
    if (rc || v <= 0)
        return rc;
    h->stopped_at = s->step;
    return SO_STOP;
}

int stop_hook_open(so_train_config *tc, const so_dist *d, ckpt_glue *cg, stop_hook **out)
{
    stop_hook *h = calloc(1, sizeof *h);
    *out = h;
    if (!h)
        return cli_error("train", CLI_FAIL, "out of memory");
    h->prev = tc->hooks;
    h->d = d;
    h->cg = cg;
    h->stopped_at = -1;
    h->hooks = (so_train_hooks){h, h->prev && h->prev->span ? hook_span : NULL, hook_step_end, hook_before_update};
    tc->hooks = &h->hooks;
    return 0;
}

long stop_hook_step(const stop_hook *h) { return h ? h->stopped_at : -1; }

void stop_hook_close(stop_hook *h) { free(h); }
