/* Training progress output: a Keras-style bar on a terminal
 * ("epoch 1/10  312/937 [=====>....] 4s 12.8ms/step loss 0.5123 24,512 img/s ETA 8s"),
 * one plain line per epoch otherwise, so logs stay readable. */
#include "progress.h"

#include <stdio.h>
#include <unistd.h>

void progress_init(progress_state *p, const char *mode, int rank)
{
    p->enabled = rank == 0 && !(mode && mode[0] == 'n'); /* "none" */
    p->bar = p->enabled && ((mode && mode[0] == 'b') || (!(mode && mode[0] == 'p') && isatty(STDOUT_FILENO)));
    p->last = -1;
}

static void bar_line(const so_progress *s)
{
    char bar[31];
    int width = 30, fill = s->steps ? (int)(width * s->step / s->steps) : width;
    for (int i = 0; i < width; i++)
        bar[i] = i < fill - 1 ? '=' : (i == fill - 1 ? (s->step == s->steps ? '=' : '>') : '.');
    bar[width] = 0;
    double per_step = s->step ? s->elapsed / s->step : 0, eta = per_step * (s->steps - s->step);
    printf("\repoch %d/%d %5ld/%ld [%s] %.0fs %.1fms/step loss %.4f %.0f img/s ETA %.0fs  ", s->epoch + 1,
           s->epochs, s->step, s->steps, bar, s->elapsed, per_step * 1e3, s->loss, s->images_per_sec, eta);
    fflush(stdout);
}

static void epoch_line(const so_progress *s)
{
    const so_epoch_stats *e = s->done;
    printf("epoch %d/%d: loss %.4f", e->epoch + 1, s->epochs, e->loss);
    if (e->test_accuracy >= 0)
        printf(", test loss %.4f, test accuracy %.4f", e->test_loss, e->test_accuracy);
    printf(", %.1f s, %.0f images/sec\n", e->seconds, e->images_per_sec);
    fflush(stdout);
}

void progress_update(void *arg, const so_progress *s)
{
    progress_state *p = arg;
    if (!p->enabled)
        return;
    if (s->done) {
        if (p->bar)
            putchar('\n');
        epoch_line(s);
        return;
    }
    /* Redraw at most ~10 times a second: printing must not cost throughput. */
    if (p->bar && (s->step == s->steps || s->elapsed - p->last >= 0.1 || s->elapsed < p->last)) {
        p->last = s->elapsed;
        bar_line(s);
    }
}
