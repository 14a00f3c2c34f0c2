/* The read path: finding the newest complete checkpoint over the levels,
 * verifying every shard it uses against the manifest's CRC32C, falling back
 * to a partner copy, the shared copy or an older checkpoint, re-splitting the
 * shards for a different number of ranks, and the single-process helpers of
 * `scaleout ckpt` (list, verify, export). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "scaleout/err.h"
#include "scaleout/log.h"
#include "session.h"

/* A checkpoint directory with a readable manifest. */
typedef struct {
    long step;
    int shared;        /* at the shared level (tried after local and partner copies) */
    char dir[4096];
} cand;

typedef struct {
    cand *v;
    int n, cap;
} cands;

static int add(cands *c, const char *dir, int shared, int quiet)
{
    so_ckpt_manifest m;
    if (ck_read_manifest(dir, &m)) {
        char p[4200];
        struct stat st;
        ck_fmt(p, sizeof p, "%s/MANIFEST", dir);
        if (!quiet && stat(p, &st) == 0) /* a damaged manifest, not just an unfinished checkpoint */
            so_log(SO_LOG_WARN, "ignoring checkpoint: %s", so_errmsg());
        return 0;
    }
    long step = m.step;
    so_ckpt_manifest_free(&m);
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        cand *g = realloc(c->v, (size_t)cap * sizeof *g);
        if (!g)
            return so_err(SO_ENOMEM, "out of memory");
        c->v = g;
        c->cap = cap;
    }
    c->v[c->n].step = step;
    c->v[c->n].shared = shared;
    ck_fmt(c->v[c->n].dir, sizeof c->v[c->n].dir, "%s", dir);
    c->n++;
    return 0;
}

/* base/ckpt-* (and base/node*\/ckpt-* when nodes) into c. */
static int collect(cands *c, const char *base, int shared, int nodes, int quiet)
{
    char **names;
    int n, rc = ck_list(base, "ckpt-", &names, &n);
    for (int i = 0; !rc && i < n; i++) {
        char dir[4096];
        ck_fmt(dir, sizeof dir, "%s/%s", base, names[i]);
        rc = add(c, dir, shared, quiet);
    }
    ck_list_free(names, n);
    if (rc || !nodes)
        return rc;
    if ((rc = ck_list(base, "node", &names, &n)))
        return rc;
    for (int i = 0; !rc && i < n; i++) {
        char dir[4096];
        ck_fmt(dir, sizeof dir, "%s/%s", base, names[i]);
        rc = collect(c, dir, shared, 0, quiet);
    }
    ck_list_free(names, n);
    return rc;
}

/* Reads and checks one copy; warns naming the file when it is damaged. */
static int read_copy(const char *path, long step, int k, const so_ckpt_shard *s, void **buf)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    size_t len = (size_t)s->bytes;
    if (ck_read(path, buf, &len)) {
        so_log(SO_LOG_WARN, "checkpoint %ld shard %d: %s; trying another copy", step, k, so_errmsg());
        return -1;
    }
    uint32_t crc = so_crc32c(0, *buf, len);
    if (crc != s->crc) {
        so_log(SO_LOG_WARN, "checkpoint %ld shard %d: '%s' fails its checksum (crc32c %08x, manifest %08x); "
               "trying another copy", step, k, path, crc, s->crc);
        free(*buf);
        *buf = NULL;
        return -1;
    }
    return 0;
}

/* First intact copy of shard k of step: own copies at the local level, then
 * partner copies, then the shared level. */
static int find_copy(const cands *c, long step, const so_ckpt_manifest *m, int k, void **buf)
{
    static const char *const kinds[3] = {"shard", "partner", "shard"};
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < c->n; i++) {
            if (c->v[i].step != step || c->v[i].shared != (pass == 2))
                continue;
            char path[4200];
            ck_fmt(path, sizeof path, "%s/%s-%d.bin", c->v[i].dir, kinds[pass], k);
            if (read_copy(path, step, k, &m->shards[k], buf) == 0)
                return 0;
        }
    return -1;
}

/* ---- restore (collective) ---------------------------------------------------------- */

static int compatible(const so_ckpt *ck, const so_ckpt_manifest *m, const char *where)
{
    if (m->model_hash != ck->model_hash || m->nparams != ck->m->nparams || m->nbufs != ck->m->nbufs)
        return so_err(SO_EINVAL, "%s: checkpoint of model '%s' (%llu parameters, hash %016llx) cannot be loaded "
                                 "into '%s' (%zu parameters, hash %016llx)",
                      where, m->model, (unsigned long long)m->nparams, (unsigned long long)m->model_hash,
                      ck->c.model_name ? ck->c.model_name : "?", ck->m->nparams,
                      (unsigned long long)ck->model_hash);
    if (m->nslots != so_optim_nslots(ck->opt) || strcmp(m->optimizer, ck->optim_name) != 0)
        return so_err(SO_EINVAL, "%s: checkpoint was trained with optimizer '%s', this run uses '%s'", where,
                      m->optimizer, ck->optim_name);
    return 0;
}

/* The lowest rank holding a valid manifest of `step` broadcasts it. */
static int share_manifest(so_ckpt *ck, const cands *c, long step, so_ckpt_manifest *m, int *ok)
{
    int have = 0, rc;
    for (int i = 0; i < c->n && !have; i++)
        if (c->v[i].step == step)
            have = ck_read_manifest(c->v[i].dir, m) == 0;
    int64_t owner = have ? ck->t.rank : ck->t.world;
    if ((rc = ck->t.allreduce_i64(ck->t.ctx, &owner, 1, SO_CKPT_MIN)))
        return rc;
    *ok = owner < ck->t.world;
    if (!*ok)
        return 0;
    char *text = NULL;
    size_t len = 0;
    if (ck->t.rank == owner && (rc = so_ckpt_manifest_format(m, &text, &len)))
        return rc;
    int64_t n = (int64_t)len;
    if (!(rc = ck->t.bcast(ck->t.ctx, &n, sizeof n, (int)owner)) && ck->t.rank != owner)
        rc = (text = malloc((size_t)n + 1)) ? 0 : so_err(SO_ENOMEM, "out of memory");
    if (!rc)
        rc = ck->t.bcast(ck->t.ctx, text, (size_t)n, (int)owner);
    if (!rc && ck->t.rank != owner) {
        so_ckpt_manifest_free(m);
        rc = so_ckpt_manifest_parse(text, (size_t)n, "broadcast manifest", m);
    }
    free(text);
    return rc;
}

/* Who holds an intact copy of each shard: first the shard's preferred rank,
 * then anyone. hold[k] = world when nobody does. */
static int locate(so_ckpt *ck, const cands *c, const so_ckpt_manifest *m, int64_t *hold, void **bufs)
{
    int W = ck->t.world, r = ck->t.rank, rc;
    for (int k = 0; k < m->nshards; k++)
        hold[k] = k % W == r && find_copy(c, m->step, m, k, &bufs[k]) == 0 ? r : W;
    if ((rc = ck->t.allreduce_i64(ck->t.ctx, hold, m->nshards, SO_CKPT_MIN)))
        return rc;
    for (int k = 0; k < m->nshards; k++) {
        int missing = hold[k] == W;
        hold[k] = missing && k % W != r && find_copy(c, m->step, m, k, &bufs[k]) == 0 ? r
                  : missing ? W : hold[k];
    }
    return ck->t.allreduce_i64(ck->t.ctx, hold, m->nshards, SO_CKPT_MIN);
}

/* The strategy's per-rank state (compression residuals, PowerSGD's Q)
 * comes back only into the same configuration on the same ranks; anything
 * else starts it afresh, which costs a few steps of accuracy, never a crash. */
static int rank_state_put(so_ckpt *ck, const so_ckpt_manifest *m, const uint8_t *src)
{
    const so_rank_state *rs = ck->c.rank_state;
    const char *now = rs ? rs->tag : "none", *then = m->rank_state_bytes ? m->rank_state : "none";
    if (rs && m->rank_state_bytes == rs->bytes && !strcmp(then, now) && m->world == ck->t.world) {
        rs->set(rs->ctx, src);
        return 0;
    }
    if (rs && rs->required) /* each rank's own model: nothing to start afresh from */
        return so_err(SO_EINVAL, "checkpoint %ld was written as %s by %d ranks, this run is %s on %d ranks: each "
                      "rank resumes its own state, so resume with the same method on the same number of ranks",
                      m->step, then, m->world, now, ck->t.world);
    if ((rs || m->rank_state_bytes) && ck->t.rank == 0)
        so_log(SO_LOG_WARN, "checkpoint %ld: per-rank strategy state dropped (written as %s by %d ranks, this run "
               "is %s on %d ranks): it starts afresh", m->step, then, m->world, now, ck->t.world);
    return 0;
}

/* Broadcasts each shard from its holder and puts its part of the state where
 * this run keeps it (ck_shard_put: the model and optimizer, or the blocks a
 * sharded strategy holds), shard after shard: a rank never holds the whole
 * state at once. */
static int assemble(so_ckpt *ck, const so_ckpt_manifest *m, const int64_t *hold, void **bufs)
{
    uint8_t *sec = malloc(m->rank_bytes), carry[4];
    int rc = sec ? 0 : so_err(SO_ENOMEM, "out of memory restoring a checkpoint"), ncarry = 0;
    int src = ck->t.rank % m->world; /* whose per-rank section this rank continues with */
    for (int k = 0; !rc && k < m->nshards; k++) {
        const so_ckpt_shard *s = &m->shards[k];
        if (!bufs[k] && !(bufs[k] = malloc(s->bytes ? s->bytes : 1))) {
            rc = so_err(SO_ENOMEM, "out of memory restoring a checkpoint");
            break;
        }
        if ((rc = ck->t.bcast(ck->t.ctx, bufs[k], (size_t)s->bytes, (int)hold[k])))
            break;
        ck_shard_put(ck, m, k, bufs[k], carry, &ncarry);
        if (src >= s->rank_first && src < s->rank_first + s->rank_count)
            memcpy(sec, (uint8_t *)bufs[k] + s->rep_len + (size_t)(src - s->rank_first) * m->rank_bytes,
                   m->rank_bytes);
        free(bufs[k]);
        bufs[k] = NULL;
    }
    if (!rc)
        rc = rank_state_put(ck, m, sec + ck_rank_bytes(ck->m, NULL));
    if (!rc) {
        ck_rank_set(ck->m, sec);
        so_optim_set_steps(ck->opt, m->optim_steps);
        so_model_params_changed(ck->m);
    }
    free(sec);
    return rc;
}

/* Tries one step: *ok = 1 when it was restored. Incompatible checkpoints fail. */
static int try_step(so_ckpt *ck, const cands *c, long step, const char *where, int *ok)
{
    so_ckpt_manifest m;
    memset(&m, 0, sizeof m);
    int rc = share_manifest(ck, c, step, &m, ok);
    if (rc || !*ok || (rc = compatible(ck, &m, where))) {
        so_ckpt_manifest_free(&m);
        return rc;
    }
    int64_t *hold = calloc((size_t)m.nshards, sizeof *hold);
    void **bufs = calloc((size_t)m.nshards, sizeof *bufs);
    rc = hold && bufs ? locate(ck, c, &m, hold, bufs) : so_err(SO_ENOMEM, "out of memory");
    for (int k = 0; !rc && k < m.nshards && *ok; k++)
        if (hold[k] == ck->t.world) {
            if (ck->t.rank == 0)
                so_log(SO_LOG_WARN, "checkpoint %ld: shard %d has no intact copy; trying an older checkpoint", step,
                       k);
            *ok = 0;
        }
    if (!rc && *ok)
        rc = assemble(ck, &m, hold, bufs);
    if (!rc && *ok && m.config_hash != ck->config_hash && ck->t.rank == 0)
        so_log(SO_LOG_WARN, "checkpoint %ld was written with a different configuration (continuing)", step);
    for (int k = 0; bufs && k < m.nshards; k++)
        free(bufs[k]);
    free(bufs);
    free(hold);
    so_ckpt_manifest_free(&m);
    return rc;
}

static int gather_cands(const so_ckpt *ck, const char *where, cands *c)
{
    int rc = 0;
    if (strcmp(where, "auto") != 0) {
        char p[4200];
        struct stat st;
        ck_fmt(p, sizeof p, "%s/MANIFEST", where);
        if (stat(where, &st) != 0)
            return so_err(SO_EIO, "--resume: '%s' does not exist", where);
        if (lstat(p, &st) != 0)
            return collect(c, where, 0, 1, 0);
        so_ckpt_manifest m; /* the checkpoint asked for: its damage is the error */
        if ((rc = ck_read_manifest(where, &m)))
            return so_err(rc, "--resume %s: %s", where, so_errmsg());
        so_ckpt_manifest_free(&m);
        return add(c, where, 0, 0);
    }
    if (ck->c.local_dir)
        rc = collect(c, ck->c.local_dir, 0, 1, 0);
    if (!rc && ck->c.shared_dir)
        rc = collect(c, ck->c.shared_dir, 1, 0, 0);
    return rc;
}

int so_ckpt_restore(so_ckpt *ck, const char *where, long *step, int *found)
{
    *step = 0;
    *found = 0;
    cands c = {0};
    int rc = gather_cands(ck, where, &c);
    int64_t any = c.n;
    if (!rc)
        rc = ck->t.allreduce_i64(ck->t.ctx, &any, 1, SO_CKPT_MAX);
    long bound = LONG_MAX;
    while (!rc && !*found) {
        int64_t s = -1;
        for (int i = 0; i < c.n; i++)
            if (c.v[i].step < bound && c.v[i].step > s)
                s = c.v[i].step;
        if ((rc = ck->t.allreduce_i64(ck->t.ctx, &s, 1, SO_CKPT_MAX)) || s < 0)
            break;
        int ok = 0;
        rc = try_step(ck, &c, s, strcmp(where, "auto") ? where : "--resume auto", &ok);
        if (!rc && ok) {
            *found = 1;
            *step = s;
        }
        bound = s;
    }
    free(c.v);
    if (!rc && !*found && (any > 0 || strcmp(where, "auto") != 0))
        rc = so_err(SO_EFORMAT, "--resume %s: no intact checkpoint found (%s)", where,
                    any > 0 ? "every one has a damaged or missing shard; see the warnings" : "none there");
    return rc;
}

/* ---- single-process helpers for `scaleout ckpt` ------------------------------------------ */

static int all_dirs(const char *root, cands *c)
{
    /* every ckpt-* directory, with or without a manifest */
    char **names, **nodes;
    int n, nn, rc = ck_list(root, "ckpt-", &names, &n);
    for (int i = 0; !rc && i < n; i++) {
        if (c->n == c->cap) {
            int cap = c->cap ? 2 * c->cap : 16;
            cand *g = realloc(c->v, (size_t)cap * sizeof *g);
            if (!g) {
                rc = so_err(SO_ENOMEM, "out of memory");
                break;
            }
            c->v = g;
            c->cap = cap;
        }
        ck_fmt(c->v[c->n].dir, sizeof c->v[c->n].dir, "%s/%s", root, names[i]);
        c->v[c->n].step = strtol(names[i] + 5, NULL, 10);
        c->v[c->n++].shared = 0;
    }
    ck_list_free(names, n);
    if (rc || (rc = ck_list(root, "node", &nodes, &nn)))
        return rc;
    for (int i = 0; !rc && i < nn; i++) {
        char dir[4096];
        ck_fmt(dir, sizeof dir, "%s/%s", root, nodes[i]);
        rc = all_dirs(dir, c);
    }
    ck_list_free(nodes, nn);
    return rc;
}

/* Whether dir/MANIFEST is still the file `was` describes. A running job's
 * prune removes the manifest first and may then recycle the shard files, so
 * a shard that fails while the manifest changed was pruned, not damaged. */
static int same_manifest(const char *dir, const struct stat *was)
{
    char p[4200];
    struct stat now;
    ck_fmt(p, sizeof p, "%s/MANIFEST", dir);
    return stat(p, &now) == 0 && now.st_ino == was->st_ino && now.st_dev == was->st_dev &&
           now.st_mtim.tv_sec == was->st_mtim.tv_sec && now.st_mtim.tv_nsec == was->st_mtim.tv_nsec;
}

int so_ckpt_scan(const char *root, int verify, so_ckpt_list_fn cb, void *arg)
{
    struct stat st;
    if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode))
        return so_err(SO_EIO, "'%s' is not a directory", root);
    cands all = {0}, good = {0};
    int rc = all_dirs(root, &all);
    if (!rc)
        rc = collect(&good, root, 0, 1, 1);
    int delay_ms = verify ? ck_test_delay_ms() : 0; /* test hook: widens the window for a prune */
    for (int i = 0; !rc && i < all.n; i++) {
        so_ckpt_manifest m;
        struct stat was;
        char mp[4200];
        ck_fmt(mp, sizeof mp, "%s/MANIFEST", all.v[i].dir);
        if (lstat(mp, &was) != 0) {
            cb(arg, all.v[i].dir, NULL, SO_CKPT_UNFINISHED, "no MANIFEST (unfinished: the run ended or was killed "
                                                            "before every rank's shard was durable)");
            continue;
        }
        if (ck_read_manifest(all.v[i].dir, &m)) {
            cb(arg, all.v[i].dir, NULL, SO_CKPT_BAD_MANIFEST, so_errmsg());
            continue;
        }
        if (delay_ms > 0)
            ck_sleep_ms(delay_ms);
        char problem[256] = "";
        for (int k = 0; verify && k < m.nshards && !problem[0]; k++) {
            void *buf = NULL;
            if (find_copy(&good, m.step, &m, k, &buf))
                ck_fmt(problem, sizeof problem, "shard %d has no intact copy", k);
            free(buf);
        }
        if (problem[0] && !same_manifest(all.v[i].dir, &was))
            cb(arg, all.v[i].dir, NULL, SO_CKPT_CHANGED, "changed while being verified (a running job pruned or "
                                                         "rewrote it)");
        else
            cb(arg, all.v[i].dir, &m, !verify ? SO_CKPT_LISTED : problem[0] ? SO_CKPT_DAMAGED : SO_CKPT_INTACT,
               problem);
        so_ckpt_manifest_free(&m);
    }
    free(all.v);
    free(good.v);
    return rc;
}

/* Copies of a checkpoint dir: itself, and the same name under sibling node dirs. */
static int sibling_cands(const char *dir, cands *c)
{
    int rc = add(c, dir, 0, 0);
    char parent[4096];
    ck_fmt(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (rc || !slash)
        return rc;
    const char *base = slash + 1;
    *slash = '\0';
    char *pslash = strrchr(parent, '/');
    const char *pname = pslash ? pslash + 1 : parent;
    if (strncmp(pname, "node", 4) != 0)
        return 0;
    char grand[4096];
    ck_fmt(grand, sizeof grand, "%.*s", pslash ? (int)(pslash - parent) : 1, pslash ? parent : ".");
    char **nodes;
    int n;
    if ((rc = ck_list(grand, "node", &nodes, &n)))
        return rc;
    for (int i = 0; !rc && i < n; i++) {
        char d[4096];
        ck_fmt(d, sizeof d, "%s/%s/%s", grand, nodes[i], base);
        if (strcmp(nodes[i], pname) != 0)
            rc = add(c, d, 0, 1);
    }
    ck_list_free(nodes, n);
    return rc;
}

/* Elements of the whole state into a buffer laid out as the whole state. */
typedef struct {
    float *rep;
    uint64_t nparams;
} whole_sink;

static void put_whole(void *ctx, int seg, uint64_t lo, uint64_t n, float *data)
{
    whole_sink *w = ctx;
    memcpy(w->rep + (uint64_t)seg * w->nparams + lo, data, n * 4);
}

/* Shard k of m into rep, the whole replicated vector, in either layout. */
static void place_whole(const so_ckpt_manifest *m, int k, uint8_t *rep, void *buf)
{
    const so_ckpt_shard *s = &m->shards[k];
    if (!m->nunits) {
        memcpy(rep + s->rep_off, buf, s->rep_len);
        return;
    }
    whole_sink w = {(float *)rep, m->nparams};
    ck_units u = {m->nunits, m->unit_shards, m->unit_replicas, m->units};
    ck_units_walk(&u, 1 + m->nslots, k, buf, put_whole, &w);
}

int so_ckpt_load_dir(const char *dir, so_ckpt_manifest *m, float **params, float **bufs)
{
    *params = NULL;
    *bufs = NULL;
    int rc = ck_read_manifest(dir, m);
    if (rc)
        return rc;
    cands c = {0};
    rc = sibling_cands(dir, &c);
    uint8_t *rep = rc ? NULL : malloc(m->rep_bytes ? m->rep_bytes : 1);
    float *b = rc ? NULL : malloc(m->nbufs * 4 + 4);
    if (!rc && (!rep || !b))
        rc = so_err(SO_ENOMEM, "out of memory loading '%s'", dir);
    for (int k = 0; !rc && k < m->nshards; k++) {
        void *buf = NULL;
        const so_ckpt_shard *s = &m->shards[k];
        if (find_copy(&c, m->step, m, k, &buf)) {
            rc = so_err(SO_EFORMAT, "%s: shard %d has no intact copy", dir, k);
            break;
        }
        place_whole(m, k, rep, buf);
        if (s->rank_first == 0 && s->rank_count > 0 && m->nbufs)
            memcpy(b, (uint8_t *)buf + s->rep_len + 32, m->nbufs * 4);
        free(buf);
    }
    free(c.v);
    if (rc) {
        free(rep);
        free(b);
        so_ckpt_manifest_free(m);
        return rc;
    }
    *params = (float *)rep; /* the parameters are the first nparams floats */
    *bufs = b;
    return 0;
}
