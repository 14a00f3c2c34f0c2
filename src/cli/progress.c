/* Training progress output: a Keras-style bar on a terminal
 * ("epoch 1/10  312/937 [=====>....] 4s 12.8ms/step loss 0.5123 24,512 img/s ETA 8s"),
 * plain lines otherwise (one per epoch, and one every LINE_SECONDS within a
 * long epoch), so files and CI logs stay readable. */
#include "progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINE_SECONDS 30.0 /* a step line this often in lines mode */

/* Open MPI hands every rank a pseudo-terminal, even when mpirun itself writes
 * to a file or a pipe: then the bar's carriage returns end up in the log.
 * Under Open MPI ask about the launcher's stdout instead (mpirun or orted is
 * the rank's parent); a remote node's orted has no terminal, so lines. */
static int stdout_is_terminal(void)
{
    if (!isatty(STDOUT_FILENO))
        return 0;
    if (!getenv("OMPI_COMM_WORLD_SIZE"))
        return 1;
    char path[64], target[256];
    snprintf(path, sizeof path, "/proc/%d/fd/1", (int)getppid());
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0)
        return 0;
    target[n] = 0;
    return !strncmp(target, "/dev/pts/", 9) || !strncmp(target, "/dev/tty", 8);
}

void progress_init(progress_state *p, const char *mode, int rank)
{
    const char *m = mode ? mode : "auto";
    p->enabled = rank == 0 && strcmp(m, "none");
    p->bar = p->enabled && (!strcmp(m, "bar") || (!strcmp(m, "auto") && stdout_is_terminal()));
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

static void step_line(const so_progress *s)
{
    double per_step = s->step ? s->elapsed / s->step : 0;
    printf("epoch %d/%d step %ld/%ld: loss %.4f, %.0f img/s, ETA %.0fs\n", s->epoch + 1, s->epochs, s->step,
           s->steps, s->loss, s->images_per_sec, per_step * (s->steps - s->step));
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
        p->last = -1;
        return;
    }
    if (s->elapsed < p->last) /* a new epoch's clock */
        p->last = -1;
    /* The bar redraws at most ~10 times a second: printing must not cost
     * throughput. Lines come every LINE_SECONDS, the first after that long. */
    if (p->bar && (s->step == s->steps || s->elapsed - p->last >= 0.1)) {
        p->last = s->elapsed;
        bar_line(s);
    } else if (!p->bar && s->step < s->steps && s->elapsed - (p->last < 0 ? 0 : p->last) >= LINE_SECONDS) {
        p->last = s->elapsed;
        step_line(s);
    }
}
