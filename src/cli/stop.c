/* SIGTERM -> checkpoint -> exit CLI_REQUEUE (stop.h). A signal may reach the
 * ranks at different steps (Slurm signals each task on its own), so the flag
 * is agreed by a non-blocking SUM posted at one step end and completed two
 * step ends later, as the checkpoint progress agreement does: by then the
 * gradient traffic has progressed it, so no rank waits for another, and every
 * rank acts on the same sum at the same step. */
#include "stop.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "scaleout/err.h"

#ifdef SCALEOUT_HAVE_MPI
#include "scaleout/comm.h"
#endif

/* Steps between posting the agreement and completing it. */
#define STOP_LAG 2

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
    ckpt_glue *cg;
    long stopped_at;
#ifdef SCALEOUT_HAVE_MPI
    so_comm_p2p *p2p; /* its own communicator: never matched against the checkpoint's requests */
    so_comm_isum *req;
    long req_step;
    int64_t sum;
#endif
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

/* Whether every rank is to stop after step s (*stop), the same on all ranks. */
static int agreed(stop_hook *h, const so_train_state *s, int *stop)
{
    *stop = 0;
#ifdef SCALEOUT_HAVE_MPI
    if (h->p2p) {
        int rc = 0;
        if (h->req && s->step >= h->req_step + STOP_LAG) {
            rc = so_comm_isum_wait(h->p2p, h->req);
            h->req = NULL;
            *stop = h->sum > 0;
        }
        if (!rc && !h->req && !*stop) {
            h->sum = term_seen;
            h->req_step = s->step;
            rc = so_comm_isum_start(h->p2p, &h->sum, 1, &h->req);
        }
        return rc;
    }
#else
    (void)h, (void)s;
#endif
    *stop = term_seen;
    return 0;
}

/* The agreement comes first, so the checkpoint hook further down the chain
 * sees the request at this very step. */
static int hook_step_end(void *arg, const so_train_state *s)
{
    stop_hook *h = arg;
    int stop = 0, rc = agreed(h, s, &stop);
    if (rc)
        return rc;
    if (stop)
        ckpt_glue_request(h->cg);
    rc = h->prev && h->prev->step_end ? h->prev->step_end(h->prev->arg, s) : 0;
    if (rc || !stop)
        return rc;
    h->stopped_at = s->step;
    return SO_STOP;
}

int stop_hook_open(so_train_config *tc, dist_handle *dh, ckpt_glue *cg, stop_hook **out)
{
    stop_hook *h = calloc(1, sizeof *h);
    *out = h;
    if (!h)
        return cli_error("train", CLI_FAIL, "out of memory");
#ifdef SCALEOUT_HAVE_MPI
    so_comm *c = dist_comm(dh);
    if (c && so_comm_size(c) > 1 && so_comm_p2p_create(c, &h->p2p))
        return cli_error("train", CLI_FAIL, "%s", so_errmsg());
#else
    (void)dh;
#endif
    h->prev = tc->hooks;
    h->cg = cg;
    h->stopped_at = -1;
    h->hooks = (so_train_hooks){h, h->prev && h->prev->span ? hook_span : NULL, hook_step_end, hook_before_update};
    tc->hooks = &h->hooks;
    return 0;
}

long stop_hook_step(const stop_hook *h) { return h ? h->stopped_at : -1; }

/* After training on every rank: the agreement still in flight was posted at
 * the same step everywhere, so completing it here matches on all ranks. */
void stop_hook_close(stop_hook *h)
{
    if (!h)
        return;
#ifdef SCALEOUT_HAVE_MPI
    if (h->req)
        so_comm_isum_wait(h->p2p, h->req);
    so_comm_p2p_destroy(h->p2p);
#endif
    free(h);
}
