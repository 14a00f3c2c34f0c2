/* Where the samples of an image data set are: the list of an imagefolder
 * tree (classes sorted by name, as torchvision's ImageFolder) or of the
 * records in tf_cnn_benchmarks' TFRecord shards, built by scanning the
 * directory or read from an index (scaleout data index), and the read of one
 * sample's encoded bytes. Decoding is elsewhere (image.c); so is the loader
 * that streams samples (stream.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_internal.h"
#include "image.h"
#include "scaleout/crc32c.h"
#include "scaleout/data.h"
#include "scaleout/err.h"
#include "scaleout/file.h"

#define INDEX_MAGIC "SOIDX01\n"
#define INDEX_NAME "scaleout.idx"

void so_image_opts_defaults(so_image_opts *o)
{
    *o = (so_image_opts){.image_size = 224, .scale_min = 0.08f, .scale_max = 1.0f, .ratio_min = 3.0f / 4.0f,
                         .ratio_max = 4.0f / 3.0f, .label_offset = 1};
}

/* ---- growable arrays of the source ------------------------------------------ */

static int src_add_name(so_image_source *s, const char *name, uint32_t *off)
{
    size_t n = strlen(name) + 1;
    if (s->names_len + n > s->names_cap) {
        size_t cap = s->names_cap ? s->names_cap * 2 : 4096;
        while (cap < s->names_len + n)
            cap *= 2;
        char *p = realloc(s->names, cap);
        if (!p)
            return so_err(SO_ENOMEM, "out of memory listing %s", s->root);
        s->names = p;
        s->names_cap = cap;
    }
    if (s->names_len + n > UINT32_MAX)
        return so_err(SO_EINVAL, "%s: file names exceed 4 GiB", s->root);
    memcpy(s->names + s->names_len, name, n);
    *off = (uint32_t)s->names_len;
    s->names_len += n;
    return 0;
}

static int src_reserve(so_image_source *s, size_t nfiles, size_t nsamples)
{
    if (nfiles > s->files_cap) {
        size_t cap = s->files_cap ? s->files_cap * 2 : 256;
        while (cap < nfiles)
            cap *= 2;
        uint32_t *p = realloc(s->file_name, cap * sizeof *p);
        if (!p)
            return so_err(SO_ENOMEM, "out of memory listing %s", s->root);
        s->file_name = p;
        s->files_cap = cap;
    }
    if (nsamples > s->samples_cap) {
        size_t cap = s->samples_cap ? s->samples_cap * 2 : 1024;
        while (cap < nsamples)
            cap *= 2;
        so_image_sample_loc *p = realloc(s->loc, cap * sizeof *p);
        if (!p)
            return so_err(SO_ENOMEM, "out of memory listing %s", s->root);
        s->loc = p;
        s->samples_cap = cap;
    }
    if (nsamples > INT32_MAX)
        return so_err(SO_EINVAL, "%s: more than 2^31 samples", s->root);
    return 0;
}

void image_source_free(so_image_source *s)
{
    if (!s)
        return;
    free(s->root);
    free(s->names);
    free(s->file_name);
    free(s->loc);
    free(s->class_name);
    free(s);
}

const char *image_source_file(const so_image_source *s, int file)
{
    return s->names + s->file_name[file];
}

/* ---- directory listing -------------------------------------------------------- */

typedef struct {
    char **v;
    size_t n, cap;
} name_list;

static void names_free(name_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    *l = (name_list){0};
}

static int names_push(name_list *l, const char *name)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **p = realloc(l->v, cap * sizeof *p);
        if (!p)
            return -1;
        l->v = p;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(name)))
        return -1;
    l->n++;
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_dir(const char *dir, const struct dirent *e)
{
    if (e->d_type == DT_DIR)
        return 1;
    if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK)
        return 0;
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Entries of dir (without . and ..), sorted by name; dirs = 1 lists the
 * subdirectories, 0 the rest. */
static int list_dir(const char *dir, int dirs, name_list *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return so_err(SO_EIO, "%s: %s", dir, strerror(errno));
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (is_dir(dir, e) == dirs && names_push(out, e->d_name))
            rc = so_err(SO_ENOMEM, "out of memory listing %s", dir);
    }
    closedir(d);
    if (!rc && out->n > 1)
        qsort(out->v, out->n, sizeof *out->v, cmp_names);
    return rc;
}

static int has_image_ext(const char *name)
{
    static const char *const ext[] = {".jpg", ".jpeg", ".png"};
    size_t n = strlen(name);
    for (int i = 0; i < 3; i++) {
        size_t k = strlen(ext[i]);
        if (n > k && !strcasecmp(name + n - k, ext[i]))
            return 1;
    }
    return 0;
}

/* Adds the images under root/rel (files sorted, then subdirectories in
 * order, as torchvision's os.walk), labelled `label`. */
static int add_class_files(so_image_source *s, const char *rel, int label, int depth)
{
    char dir[PATH_MAX], sub[PATH_MAX];
    name_list files = {0}, dirs = {0};
    if ((size_t)snprintf(dir, sizeof dir, "%s/%s", s->root, rel) >= sizeof dir)
        return so_err(SO_EIO, "%s/%s: path too long", s->root, rel);
    int rc = list_dir(dir, 0, &files);
    if (!rc && depth < 16)
        rc = list_dir(dir, 1, &dirs);
    for (size_t i = 0; !rc && i < files.n; i++) {
        if (!has_image_ext(files.v[i]))
            continue;
        if ((size_t)snprintf(sub, sizeof sub, "%s/%s", rel, files.v[i]) >= sizeof sub)
            rc = so_err(SO_EIO, "%s/%s: path too long", dir, files.v[i]);
        if (!rc)
            rc = src_reserve(s, (size_t)s->nfiles + 1, (size_t)s->n + 1);
        if (!rc)
            rc = src_add_name(s, sub, &s->file_name[s->nfiles]);
        if (!rc) {
            s->loc[s->n] = (so_image_sample_loc){.file = (uint32_t)s->nfiles, .label = label};
            s->nfiles++;
            s->n++;
        }
    }
    for (size_t i = 0; !rc && i < dirs.n; i++) {
        if ((size_t)snprintf(sub, sizeof sub, "%s/%s", rel, dirs.v[i]) >= sizeof sub)
            rc = so_err(SO_EIO, "%s/%s: path too long", dir, dirs.v[i]);
        else
            rc = add_class_files(s, sub, label, depth + 1);
    }
    names_free(&files);
    names_free(&dirs);
    return rc;
}

static int scan_folder(so_image_source *s, const char *split)
{
    char dir[PATH_MAX];
    name_list classes = {0};
    snprintf(dir, sizeof dir, "%s/%s", s->root, split);
    int rc = list_dir(dir, 1, &classes);
    if (!rc && classes.n == 0)
        rc = so_err(SO_EFORMAT, "%s: no class directories (expected %s/<class>/<image>)", dir, dir);
    if (!rc && classes.n > INT32_MAX / 2)
        rc = so_err(SO_EFORMAT, "%s: too many classes", dir);
    if (!rc && !(s->class_name = calloc(classes.n, sizeof *s->class_name)))
        rc = so_err(SO_ENOMEM, "out of memory listing %s", dir);
    for (size_t c = 0; !rc && c < classes.n; c++) {
        char rel[PATH_MAX];
        int before = s->n;
        snprintf(rel, sizeof rel, "%s/%s", split, classes.v[c]);
        rc = src_add_name(s, classes.v[c], &s->class_name[c]);
        if (!rc)
            rc = add_class_files(s, rel, (int)c, 0);
        if (!rc && s->n == before)
            rc = so_err(SO_EFORMAT, "%s/%s: empty class directory (no .jpg, .jpeg or .png files)", dir,
                        classes.v[c]);
    }
    if (!rc)
        s->classes = (int)classes.n;
    names_free(&classes);
    return rc;
}

/* ---- TFRecord shards ---------------------------------------------------------- */

static int is_shard(const char *name, const char *prefix)
{
    size_t k = strlen(prefix);
    return !strncmp(name, prefix, k) && name[k] == '-' && strstr(name + k, "-of-") != NULL;
}

int image_read_range(const char *path, uint64_t off, size_t len, uint8_t *buf)
{
    int fd;
    uint64_t size;
    int rc = so_file_open_read(path, &fd, &size); /* a FIFO in a shard's place never blocks */
    if (rc)
        return rc;
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, buf + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = errno;
            close(fd);
            return r == 0 ? so_err(SO_EFORMAT, "%s: ends at %llu, before the %zu bytes at offset %llu", path,
                                   (unsigned long long)(off + got), len, (unsigned long long)off)
                          : so_err(SO_EIO, "%s: %s", path, strerror(e));
        }
        got += (size_t)r;
    }
    close(fd);
    return 0;
}

/* Walks the records of one shard file (read whole, in chunks of records). */
static int scan_shard(so_image_source *s, const char *path)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = so_read_file_raw(path, &buf, &len);
    uint32_t file = (uint32_t)s->nfiles;
    if (!rc)
        rc = src_reserve(s, (size_t)s->nfiles + 1, (size_t)s->n);
    if (!rc)
        rc = src_add_name(s, path + strlen(s->root) + 1, &s->file_name[s->nfiles]);
    if (!rc)
        s->nfiles++;
    for (size_t at = 0; !rc && at < len;) {
        size_t poff, plen, next;
        const uint8_t *img;
        size_t ilen;
        int64_t label;
        char what[PATH_MAX + 48];
        snprintf(what, sizeof what, "%s (record at byte %zu)", path, at);
        rc = so_tfrecord_next(buf + at, len - at, what, &poff, &plen, &next);
        if (!rc)
            rc = so_example_parse(buf + at + poff, plen, what, &img, &ilen, &label);
        if (!rc && (label < INT32_MIN / 2 || label > INT32_MAX / 2))
            rc = so_err(SO_EFORMAT, "%s: label %lld out of range", what, (long long)label);
        if (!rc)
            rc = src_reserve(s, (size_t)s->nfiles, (size_t)s->n + 1);
        if (!rc) {
            s->loc[s->n++] = (so_image_sample_loc){.file = file, .label = (int32_t)label, .offset = at,
                                                   .length = next};
            at += next;
        }
    }
    free(buf);
    return rc;
}

static int scan_tfrecord(so_image_source *s, const char *prefix)
{
    name_list files = {0};
    int rc = list_dir(s->root, 0, &files), found = 0;
    for (size_t i = 0; !rc && i < files.n; i++) {
        if (!is_shard(files.v[i], prefix))
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", s->root, files.v[i]);
        found++;
        rc = scan_shard(s, path);
    }
    if (!rc && !found)
        rc = so_err(SO_EIO, "%s: no TFRecord shards %s-*-of-*", s->root, prefix);
    names_free(&files);
    return rc;
}

/* ---- the index ---------------------------------------------------------------- */
/* Little-endian: magic, u32 kind (1 imagefolder, 2 tfrecord), then per split
 * (train, val): u32 classes, u32 files, u64 samples, u64 name bytes, the name
 * arena, u32 file name offsets, u32 class name offsets, samples x (u32 file,
 * i32 label, u64 offset, u64 length); then u32 CRC32C of all before. */

typedef struct {
    uint8_t *p;
    size_t len, cap;
} wbuf;

static int wb_put(wbuf *b, const void *v, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1 << 16;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, v, n);
    b->len += n;
    return 0;
}

static int put_split(wbuf *b, const so_image_source *s)
{
    uint32_t h32[2] = {(uint32_t)s->classes, (uint32_t)s->nfiles};
    uint64_t h64[2] = {(uint64_t)s->n, s->names_len};
    int bad = wb_put(b, h32, sizeof h32) || wb_put(b, h64, sizeof h64) || wb_put(b, s->names, s->names_len) ||
              wb_put(b, s->file_name, (size_t)s->nfiles * 4) ||
              wb_put(b, s->class_name ? s->class_name : (uint32_t *)"", s->class_name ? (size_t)s->classes * 4 : 0);
    for (int i = 0; !bad && i < s->n; i++) {
        const so_image_sample_loc *l = &s->loc[i];
        uint32_t v32[2] = {l->file, (uint32_t)l->label};
        uint64_t v64[2] = {l->offset, l->length};
        bad = wb_put(b, v32, 8) || wb_put(b, v64, 16);
    }
    return bad ? so_err(SO_ENOMEM, "out of memory writing the index") : 0;
}

typedef struct {
    const uint8_t *p, *end;
} rbuf;

static int rb_get(rbuf *b, void *v, size_t n)
{
    if ((size_t)(b->end - b->p) < n)
        return -1;
    memcpy(v, b->p, n);
    b->p += n;
    return 0;
}

/* Reads split `which` (0 train, 1 val) of the index into s. */
static int get_split(rbuf *b, so_image_source *s, const char *path)
{
    uint32_t h32[2];
    uint64_t h64[2];
    if (rb_get(b, h32, 8) || rb_get(b, h64, 16) || h64[0] > INT32_MAX || h64[1] > UINT32_MAX ||
        h64[1] > (size_t)(b->end - b->p) || h32[0] > INT32_MAX / 2 || h32[1] > INT32_MAX)
        return so_err(SO_EFORMAT, "%s: damaged index header", path);
    s->classes = (int)h32[0];
    s->nfiles = (int)h32[1];
    s->n = (int)h64[0];
    s->names_len = s->names_cap = (size_t)h64[1];
    size_t need = (size_t)s->nfiles * 4 + (size_t)s->classes * 4 + (size_t)s->n * 24;
    if ((size_t)(b->end - b->p) - s->names_len < need)
        return so_err(SO_EFORMAT, "%s: index shorter than its header says", path);
    s->names = malloc(s->names_len ? s->names_len : 1);
    s->file_name = malloc(((size_t)s->nfiles + 1) * 4);
    s->class_name = calloc((size_t)s->classes + 1, 4);
    s->loc = malloc(((size_t)s->n + 1) * sizeof *s->loc);
    if (!s->names || !s->file_name || !s->class_name || !s->loc)
        return so_err(SO_ENOMEM, "%s: out of memory for the index", path);
    rb_get(b, s->names, s->names_len);
    rb_get(b, s->file_name, (size_t)s->nfiles * 4);
    rb_get(b, s->class_name, (size_t)s->classes * 4);
    for (int i = 0; i < s->n; i++) {
        uint32_t v32[2];
        uint64_t v64[2];
        rb_get(b, v32, 8);
        rb_get(b, v64, 16);
        s->loc[i] = (so_image_sample_loc){.file = v32[0], .label = (int32_t)v32[1], .offset = v64[0], .length = v64[1]};
        if (v32[0] >= (uint32_t)s->nfiles)
            return so_err(SO_EFORMAT, "%s: sample %d names file %u of %d", path, i, v32[0], s->nfiles);
    }
    for (int f = 0; f < s->nfiles; f++)
        if (s->file_name[f] >= s->names_len || memchr(s->names + s->file_name[f], 0, s->names_len - s->file_name[f]) == NULL)
            return so_err(SO_EFORMAT, "%s: damaged file name table", path);
    for (int c = 0; c < s->classes; c++)
        if (s->class_name[c] >= s->names_len || memchr(s->names + s->class_name[c], 0, s->names_len - s->class_name[c]) == NULL)
            return so_err(SO_EFORMAT, "%s: damaged class name table", path);
    return 0;
}

static int read_index(so_image_source *s, const char *path, int kind, int train)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = so_read_file_raw(path, &buf, &len);
    if (rc)
        return rc;
    uint32_t k = 0, crc;
    rbuf b = {buf, buf + len};
    if (len < 16 || memcmp(buf, INDEX_MAGIC, 8))
        rc = so_err(SO_EFORMAT, "%s: not a scaleout data index", path);
    if (!rc) {
        memcpy(&crc, buf + len - 4, 4);
        if (so_crc32c(0, buf, len - 4) != crc)
            rc = so_err(SO_EFORMAT, "%s: index checksum mismatch (damaged; rebuild with scaleout data index)", path);
    }
    b.p += 8;
    b.end -= 4;
    if (!rc && (rb_get(&b, &k, 4) || (int)k != kind))
        rc = so_err(SO_EFORMAT, "%s: an index of a %s data set, not %s", path, k == 1 ? "imagefolder" : "tfrecord",
                    kind == 1 ? "imagefolder" : "tfrecord");
    if (!rc && !train) { /* skip the train split */
        so_image_source skip = {.root = NULL};
        rc = get_split(&b, &skip, path);
        free(skip.names);
        free(skip.file_name);
        free(skip.class_name);
        free(skip.loc);
    }
    if (!rc)
        rc = get_split(&b, s, path);
    free(buf);
    return rc;
}

/* ---- open --------------------------------------------------------------------- */

static int kind_of(const char *kind)
{
    if (!strcmp(kind, "imagefolder"))
        return 1;
    if (!strcmp(kind, "tfrecord"))
        return 2;
    return 0;
}

static int scan(so_image_source *s, int kind, int train)
{
    if (kind == 1)
        return scan_folder(s, train ? "train" : "val");
    return scan_tfrecord(s, train ? "train" : "validation");
}

/* Labels after the offset, classes from them (tfrecord), all checked. */
static int finish_labels(so_image_source *s, int kind, const char *dir, int offset)
{
    if (s->n == 0)
        return so_err(SO_EFORMAT, "%s: no images", dir);
    if (kind == 2) {
        int32_t hi = INT32_MIN;
        for (int i = 0; i < s->n; i++) {
            int32_t l = s->loc[i].label - offset;
            if (l < 0)
                return so_err(SO_EFORMAT, "%s: %s: label %d is below --label-offset %d", dir,
                              image_source_file(s, (int)s->loc[i].file), s->loc[i].label, offset);
            hi = l > hi ? l : hi;
        }
        s->classes = hi + 1;
        s->label_offset = offset;
    }
    return 0;
}

static int index_path(const char *dir, const so_image_opts *o, char *path, size_t size, int *explicit_index)
{
    *explicit_index = o && o->index;
    if (*explicit_index) {
        snprintf(path, size, "%s", o->index);
        return 0;
    }
    if ((size_t)snprintf(path, size, "%s/%s", dir, INDEX_NAME) >= size)
        return so_err(SO_EIO, "%s: path too long", dir);
    return 0;
}

int image_source_open(const char *kind_name, const char *dir, int train, const so_image_opts *o,
                      so_image_source **out)
{
    *out = NULL;
    int kind = kind_of(kind_name), explicit_index, rc;
    if (!kind)
        return so_err(SO_EINVAL, "unknown image data set kind '%s' (imagefolder, tfrecord)", kind_name);
    struct stat st;
    if (stat(dir, &st) != 0)
        return so_err(SO_EIO, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return so_err(SO_EIO, "%s: not a directory", dir);
    so_image_source *s = calloc(1, sizeof *s);
    if (!s || !(s->root = strdup(dir))) {
        free(s);
        return so_err(SO_ENOMEM, "out of memory opening %s", dir);
    }
    s->kind = kind;
    char ipath[PATH_MAX];
    if ((rc = index_path(dir, o, ipath, sizeof ipath, &explicit_index)))
        goto out;
    s->indexed = explicit_index || access(ipath, R_OK) == 0;
    rc = s->indexed ? read_index(s, ipath, kind, train) : scan(s, kind, train);
    if (!rc)
        rc = finish_labels(s, kind, dir, o ? o->label_offset : 1);
out:
    if (rc)
        image_source_free(s);
    else
        *out = s;
    return rc;
}

int so_image_has_split(const char *kind_name, const char *dir, int train, const so_image_opts *o)
{
    int kind = kind_of(kind_name), explicit_index;
    char path[PATH_MAX];
    struct stat st;
    if (!kind || index_path(dir, o, path, sizeof path, &explicit_index))
        return 0;
    if (explicit_index || access(path, R_OK) == 0) {
        so_image_source s = {.root = NULL};
        int has = read_index(&s, path, kind, train) == 0 && s.n > 0;
        free(s.names), free(s.file_name), free(s.class_name), free(s.loc);
        return has;
    }
    if (kind == 1) {
        snprintf(path, sizeof path, "%s/%s", dir, train ? "train" : "val");
        return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    }
    name_list files = {0};
    int has = 0;
    if (list_dir(dir, 0, &files) == 0)
        for (size_t i = 0; i < files.n && !has; i++)
            has = is_shard(files.v[i], train ? "train" : "validation");
    names_free(&files);
    return has;
}

int so_image_index_write(const char *kind_name, const char *dir, const so_image_opts *o, const char *path,
                         long *nsamples)
{
    so_image_opts opts;
    so_image_opts_defaults(&opts);
    if (o)
        opts = *o;
    opts.index = NULL;
    char def[PATH_MAX];
    if (!path) {
        snprintf(def, sizeof def, "%s/%s", dir, INDEX_NAME);
        path = def;
    }
    int kind = kind_of(kind_name), rc = 0;
    if (!kind)
        return so_err(SO_EINVAL, "unknown image data set kind '%s' (imagefolder, tfrecord)", kind_name);
    so_image_source *sp[2] = {NULL, NULL};
    wbuf b = {0};
    for (int split = 0; !rc && split < 2; split++) {
        so_image_source *s = calloc(1, sizeof *s);
        if (!s || !(s->root = strdup(dir))) {
            free(s);
            rc = so_err(SO_ENOMEM, "out of memory");
            break;
        }
        s->kind = kind;
        sp[split] = s;
        rc = scan(s, kind, split == 0);
    }
    uint32_t k = (uint32_t)kind;
    if (!rc && (wb_put(&b, INDEX_MAGIC, 8) || wb_put(&b, &k, 4)))
        rc = so_err(SO_ENOMEM, "out of memory writing the index");
    for (int split = 0; !rc && split < 2; split++)
        rc = put_split(&b, sp[split]);
    if (!rc) {
        uint32_t crc = so_crc32c(0, b.p, b.len);
        if (wb_put(&b, &crc, 4))
            rc = so_err(SO_ENOMEM, "out of memory writing the index");
    }
    if (!rc)
        rc = so_write_file_atomic(path, b.p, b.len);
    if (!rc && nsamples)
        *nsamples = (long)sp[0]->n + sp[1]->n;
    image_source_free(sp[0]);
    image_source_free(sp[1]);
    free(b.p);
    return rc;
}

/* ---- one sample's bytes ---------------------------------------------------------- */

int img_read_sample(const so_image_source *s, int i, uint8_t **buf, size_t *cap, const uint8_t **img, size_t *ilen,
                    char *what, size_t what_size, size_t *nread)
{
    const so_image_sample_loc *l = &s->loc[i];
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", s->root, image_source_file(s, (int)l->file));
    if (s->kind == 1) {
        snprintf(what, what_size, "%s", path);
        int rc = image_read_file(path, buf, cap, ilen, SO_IMAGE_MAX_BYTES);
        *img = *buf;
        *nread = rc ? 0 : *ilen;
        return rc;
    }
    snprintf(what, what_size, "%s (record at byte %llu)", path, (unsigned long long)l->offset);
    if (l->length < 16 || l->length > SO_IMAGE_MAX_BYTES)
        return so_err(SO_EFORMAT, "%s: record length %llu out of range", what, (unsigned long long)l->length);
    size_t n = (size_t)l->length;
    if (n > *cap) {
        uint8_t *p = realloc(*buf, n);
        if (!p)
            return so_err(SO_ENOMEM, "%s: out of memory", what);
        *buf = p;
        *cap = n;
    }
    size_t poff, plen, next;
    int64_t label;
    int rc = image_read_range(path, l->offset, n, *buf);
    *nread = rc ? 0 : n;
    if (!rc)
        rc = so_tfrecord_next(*buf, n, what, &poff, &plen, &next);
    if (!rc)
        rc = so_example_parse(*buf + poff, plen, what, img, ilen, &label);
    if (!rc && label != l->label)
        rc = so_err(SO_EFORMAT, "%s: label %lld, the index says %d (stale index: rebuild it)", what,
                    (long long)label, l->label);
    return rc;
}

int so_image_read(const so_dataset *d, int i, uint8_t **buf, size_t *len, const char **source)
{
    if (!d || !d->images || i < 0 || i >= d->n)
        return so_err(SO_EINVAL, "so_image_read: no image sample %d", i);
    const so_image_source *s = d->images;
    uint8_t *raw = NULL;
    size_t cap = 0, ilen, nread;
    const uint8_t *img;
    char what[PATH_MAX + 64];
    int rc = img_read_sample(s, i, &raw, &cap, &img, &ilen, what, sizeof what, &nread);
    if (!rc && !(*buf = malloc(ilen ? ilen : 1)))
        rc = so_err(SO_ENOMEM, "out of memory");
    if (!rc) {
        memcpy(*buf, img, ilen);
        *len = ilen;
        if (source)
            *source = image_source_file(s, (int)s->loc[i].file);
    }
    free(raw);
    return rc;
}

int so_image_sample(const so_dataset *d, int i, int train, uint64_t seed, int epoch, int dct_scale, float *out)
{
    if (!d || !d->images || i < 0 || i >= d->n)
        return so_err(SO_EINVAL, "so_image_sample: no image sample %d", i);
    img_ctx c;
    float lut[3][256];
    uint8_t *raw = NULL;
    size_t cap = 0, ilen, nread;
    const uint8_t *img;
    char what[PATH_MAX + 64];
    img_build_lut(d->mean, d->std, lut);
    int rc = img_ctx_init(&c);
    if (!rc)
        rc = img_read_sample(d->images, i, &raw, &cap, &img, &ilen, what, sizeof what, &nread);
    if (!rc)
        rc = img_transform(&c, d->images, img, ilen, what, train, seed, epoch, i, dct_scale,
                           (const float(*)[256])lut, out);
    img_ctx_deinit(&c);
    free(raw);
    return rc;
}

/* ---- the data set ------------------------------------------------------------------- */

int so_dataset_open_images(const char *kind, const char *dir, int train, const so_image_opts *o, so_dataset **out)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    so_image_opts def;
    *out = NULL;
    if (!o) {
        so_image_opts_defaults(&def);
        o = &def;
    }
    if (o->image_size < 1 || o->image_size > 4096)
        return so_err(SO_EINVAL, "--image-size: %d is not in 1..4096", o->image_size);
    if (o->resize && (o->resize < o->image_size || o->resize > 8192))
        return so_err(SO_EINVAL, "--resize: %d is not in %d..8192", o->resize, o->image_size);
    if (!(o->scale_min > 0 && o->scale_min <= o->scale_max && o->scale_max <= 1))
        return so_err(SO_EINVAL, "--crop-scale: (%g, %g) is not a range within (0, 1]", o->scale_min, o->scale_max);
    if (!(o->ratio_min > 0 && o->ratio_min <= o->ratio_max))
        return so_err(SO_EINVAL, "crop aspect ratio range (%g, %g) is not valid", o->ratio_min, o->ratio_max);
    if (!so_image_have_jpeg())
        return so_err(SO_EINVAL, "--dataset %s: this scaleout was built without libturbojpeg, which decodes its "
                                 "JPEGs (apt-get install libturbojpeg0-dev, then rebuild)", kind);
    so_image_source *s = NULL;
    int rc = image_source_open(kind, dir, train, o, &s);
    if (rc)
        return rc;
    s->image_size = o->image_size;
    s->resize = o->resize;
    s->scale_min = o->scale_min, s->scale_max = o->scale_max;
    s->ratio_min = o->ratio_min, s->ratio_max = o->ratio_max;
    so_dataset *d = calloc(1, sizeof *d);
    if (d)
        d->labels = malloc((size_t)s->n * sizeof *d->labels);
    if (!d || !d->labels) {
        int n = s->n;
        free(d);
        image_source_free(s);
        return so_err(SO_ENOMEM, "%s: out of memory for %d labels", dir, n);
    }
    snprintf(d->name, sizeof d->name, "%s", kind);
    d->n = s->n;
    d->c = 3;
    d->h = d->w = o->image_size;
    d->classes = s->classes;
    for (int i = 0; i < s->n; i++)
        d->labels[i] = s->loc[i].label - s->label_offset;
    memcpy(d->mean, mean, sizeof mean);
    memcpy(d->std, std, sizeof std);
    d->images = s;
    *out = d;
    return 0;
}
