/* Background I/O on the timeline: the checkpoint writer and flush threads
 * report each piece of work here while the training thread records its own
 * events, so everything in this file runs under the recorder's io_mu and
 * touches nothing the training thread's recording uses (no interning, no
 * main event array). Written as two extra trace threads per rank. */
#include "prof_internal.h"

#include <stdlib.h>
#include <string.h>

static const char *const track_names[2] = {"checkpoint I/O", "checkpoint flush"};

void prof_io_init(so_prof *p)
{
    pthread_mutex_init(&p->io_mu, NULL);
    p->io_last[0] = p->io_last[1] = -1;
}

void prof_io_free(so_prof *p)
{
    pthread_mutex_destroy(&p->io_mu);
    free(p->io);
}

/* Index of the kind's totals (added if new), -1 when the table is full. */
static int io_kind(so_prof *p, const char *kind)
{
    for (int i = 0; i < p->nio_kinds; i++)
        if (!strncmp(p->io_tot[i].kind, kind, sizeof p->io_tot[i].kind - 1))
            return i;
    if (p->nio_kinds == SO_PROF_IO_KINDS)
        return -1;
    so_prof_io_total *t = &p->io_tot[p->nio_kinds];
    memset(t, 0, sizeof *t);
    snprintf(t->kind, sizeof t->kind, "%s", kind);
    return p->nio_kinds++;
}

static prof_io_ev *io_push(so_prof *p)
{
    if (p->nio >= p->cfg.max_events)
        return NULL;
    if (p->nio == p->capio) {
        size_t cap = p->capio ? 2 * p->capio : 64;
        prof_io_ev *g = realloc(p->io, cap * sizeof *g);
        if (!g)
            return NULL;
        p->io = g;
        p->capio = cap;
    }
    return &p->io[p->nio++];
}

/* Outside the window: extends this track's summary of the same checkpoint,
 * or starts one. The writer runs a checkpoint's tasks back to back (FIFO),
 * so a checkpoint's events on one track are consecutive. */
static int io_summarise(so_prof *p, const so_prof_io_event *e, int tr)
{
    long last = p->io_last[tr];
    prof_io_ev *s = last >= 0 ? &p->io[last] : NULL;
    if (s && s->kind < 0 && s->step == e->step) {
        s->t1 = e->t1 > s->t1 ? e->t1 : s->t1;
        s->bytes += e->bytes;
        s->count++;
        s->failed |= (short)(e->failed != 0);
        return 0;
    }
    if (!(s = io_push(p)))
        return -1;
    *s = (prof_io_ev){e->t0, e->t1, e->step, e->bytes, -1, 1, (short)e->track, (short)(e->failed != 0)};
    p->io_last[tr] = (long)(s - p->io);
    return 0;
}

void so_prof_io(so_prof *p, const so_prof_io_event *e)
{
    if (!p || !e || (e->track != SO_PROF_TRACK_CKPT_IO && e->track != SO_PROF_TRACK_CKPT_FLUSH))
        return;
    int tr = e->track - SO_PROF_TRACK_CKPT_IO;
    pthread_mutex_lock(&p->io_mu);
    int k = io_kind(p, e->kind ? e->kind : "?");
    if (k >= 0) {
        p->io_tot[k].count++;
        p->io_tot[k].bytes += e->bytes;
        p->io_tot[k].seconds += e->t1 - e->t0;
    }
    int rc = -1;
    if (k >= 0 && !prof_in_window(p, e->step)) {
        rc = io_summarise(p, e, tr);
    } else if (k >= 0) {
        prof_io_ev *v = io_push(p);
        if (v) {
            *v = (prof_io_ev){e->t0, e->t1, e->step, e->bytes, k, 1, (short)e->track, (short)(e->failed != 0)};
            p->io_last[tr] = (long)(v - p->io);
            rc = 0;
        }
    }
    if (rc)
        p->io_dropped++;
    pthread_mutex_unlock(&p->io_mu);
}

int so_prof_io_totals(so_prof *p, so_prof_io_total *out, int max)
{
    pthread_mutex_lock(&p->io_mu);
    int n = p->nio_kinds < max ? p->nio_kinds : max;
    memcpy(out, p->io_tot, (size_t)n * sizeof *out);
    pthread_mutex_unlock(&p->io_mu);
    return n;
}

static double mb_per_s(uint64_t bytes, double seconds) { return seconds > 0 ? (double)bytes / seconds / 1e6 : 0; }

void prof_io_write_trace(so_prof *p, FILE *f, const so_prof_clock *clock, double origin)
{
    pthread_mutex_lock(&p->io_mu);
    int used[2] = {0, 0};
    for (size_t i = 0; i < p->nio; i++)
        used[p->io[i].track - SO_PROF_TRACK_CKPT_IO] = 1;
    for (int tr = 0; tr < 2; tr++)
        if (used[tr])
            fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                    p->cfg.rank, SO_PROF_TRACK_CKPT_IO + tr, track_names[tr]);
    for (size_t i = 0; i < p->nio; i++) {
        const prof_io_ev *e = &p->io[i];
        long long t0 = prof_ticks(clock, origin, e->t0), t1 = prof_ticks(clock, origin, e->t1);
        if (t1 < t0)
            t1 = t0;
        int flush = e->track == SO_PROF_TRACK_CKPT_FLUSH;
        char name[64];
        if (e->kind >= 0)
            snprintf(name, sizeof name, "%s", p->io_tot[e->kind].kind);
        else
            snprintf(name, sizeof name, "%s (summary)", track_names[flush]);
        fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                   "\"args\":{\"step\":%ld,\"bytes\":%llu,\"MB/s\":%.3f",
                name, e->kind < 0 ? "ckpt_summary" : flush ? "ckpt_flush" : "ckpt_io", p->cfg.rank, e->track,
                (double)t0 / PROF_TICKS_PER_US, (double)(t1 - t0) / PROF_TICKS_PER_US, e->step, (unsigned long long)e->bytes,
                mb_per_s(e->bytes, e->t1 - e->t0));
        if (e->kind < 0)
            fprintf(f, ",\"events\":%d", e->count);
        fputs(e->failed ? ",\"failed\":true}}" : "}}", f);
    }
    pthread_mutex_unlock(&p->io_mu);
}

void prof_io_write_json(so_json *js, so_prof *p)
{
    pthread_mutex_lock(&p->io_mu);
    so_json_arr_begin(js, "checkpoint_io");
    for (int i = 0; i < p->nio_kinds; i++) {
        const so_prof_io_total *t = &p->io_tot[i];
        so_json_obj_begin(js, NULL);
        so_json_str(js, "kind", t->kind);
        so_json_int(js, "count", t->count);
        so_json_int(js, "bytes", (int64_t)t->bytes);
        so_json_num(js, "seconds", t->seconds);
        so_json_num(js, "mb_per_s", mb_per_s(t->bytes, t->seconds));
        so_json_obj_end(js);
    }
    so_json_arr_end(js);
    pthread_mutex_unlock(&p->io_mu);
}
