/* When checkpoints are due (every N steps, N epochs, on request, or Daly's
 * interval from --mtbf), when the ranks' next progress round is posted, and
 * how far ahead of a due step its shard files are made. Decided from agreed
 * values and step numbers only, so every rank decides alike. */
#include <limits.h>
#include <math.h>

#include "scaleout/timer.h"
#include "session.h"

int ck_due(so_ckpt *ck, const so_train_state *s)
{
    if (ck->sched.requested)
        return 1;
    if (ck->c.mtbf_hours > 0)
        return s->step >= ck->sched.next_auto;
    if (ck->c.every_steps > 0)
        return s->step % ck->c.every_steps == 0;
    return ck->c.every_epochs > 0 && s->epoch_end && s->epoch % ck->c.every_epochs == 0;
}

/* Steps from s to the next due step (an upper bound for epoch intervals,
 * whose due step is the next epoch end; LONG_MAX when unknown). */
long ck_steps_to_due(const so_ckpt *ck, const so_train_state *s)
{
    if (ck->c.mtbf_hours > 0)
        return ck->sched.next_auto > s->step ? ck->sched.next_auto - s->step : 1;
    if (ck->c.every_steps > 0)
        return ck->c.every_steps - s->step % ck->c.every_steps;
    if (ck->c.every_epochs > 0 && s->steps_per_epoch > 0)
        return s->steps_per_epoch - s->epoch_step;
    return LONG_MAX;
}

/* Auto interval: Daly's optimum from the largest stall any rank saw and the
 * slowest rank's mean step time, never shorter than a checkpoint takes to
 * complete in the background. */
int ck_update_interval(so_ckpt *ck, long step, double stall)
{
    if (ck->c.mtbf_hours <= 0)
        return 0;
    int64_t v[2] = {(int64_t)(stall * 1e6), (int64_t)(ck->sched.step_time * 1e6)};
    int rc = ck->t.allreduce_i64(ck->t.ctx, v, 2, SO_CKPT_MAX);
    if (rc)
        return rc;
    double delta = v[0] * 1e-6 > 1e-6 ? v[0] * 1e-6 : 1e-6, st = v[1] > 0 ? v[1] * 1e-6 : 1e-3;
    double tau = so_ckpt_daly(delta, ck->c.mtbf_hours * 3600.0);
    long steps = (long)ceil(tau / st);
    long floor_steps = ck->sched.steps_to_complete + 1;
    ck->st.interval = steps > floor_steps ? steps : floor_steps;
    ck->sched.next_auto = step + ck->st.interval;
    return 0;
}

void ck_track_step_time(so_ckpt *ck)
{
    double now = so_now();
    if (ck->sched.last_step_time >= 0) {
        double dt = now - ck->sched.last_step_time;
        ck->sched.step_time = ck->sched.step_time > 0 ? 0.9 * ck->sched.step_time + 0.1 * dt : dt;
    }
    ck->sched.last_step_time = now;
}

/* When the next progress round is posted: one step after anything moved,
 * then backing off (2, 4, ... 16 steps) while a long write or flush runs, so
 * an idle poll is not paid at every step. Decided from agreed values and
 * step numbers only, so every rank posts at the same steps. */
void ck_schedule_poll(so_ckpt *ck, const so_train_state *s, int moved)
{
    ck->sched.poll_gap = moved || ck->sched.poll_gap < 1 ? 1 : ck->sched.poll_gap < 16 ? 2 * ck->sched.poll_gap : 16;
    /* The last poll before the next due step is posted two steps ahead, so a
     * finished checkpoint is known to be finished by then and the next one
     * does not start with a blocking round. */
    long gap = ck->sched.poll_gap, to_due = ck_steps_to_due(ck, s);
    if (to_due < LONG_MAX && gap > to_due - 2)
        gap = to_due - 2 > 1 ? to_due - 2 : 1;
    ck->sched.next_poll = s->step + gap;
}

/* Steps ahead of a due checkpoint at which its shard files are made: a
 * tenth of the interval, at least RESERVE_AHEAD. 4 steps were too few at
 * ResNet-50 np 4 (4 ranks on 2 cores): making 100 MB took longer than 5 s
 * there, and the snapshot queued behind it stalled the update 114-193 ms. */
#define RESERVE_AHEAD 4

long ck_reserve_lead(const so_ckpt *ck, const so_train_state *s)
{
    long every = ck->c.every_steps > 0 ? ck->c.every_steps
                 : ck->c.every_epochs > 0 ? s->steps_per_epoch * ck->c.every_epochs : 0;
    return every / 10 > RESERVE_AHEAD ? every / 10 : RESERVE_AHEAD;
}

