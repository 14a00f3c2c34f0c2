/* A small JSON reader for the benchmark records (`bench compare`, `bench
 * plot`, `bench scaling` reading its children's results): parses a whole
 * document into a tree; lookups by key or "a.b.c" path. */
#ifndef SCALEOUT_CLI_JREAD_H
#define SCALEOUT_CLI_JREAD_H
#include <stddef.h>

typedef enum { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ } jv_type;

typedef struct jv {
    jv_type t;
    double num;        /* JV_NUM, JV_BOOL (0/1) */
    char *str;         /* JV_STR */
    char *key;         /* member name inside an object */
    struct jv *kid;    /* first element / member */
    struct jv *next;   /* next sibling */
    int len;           /* elements / members */
} jv;

/* Parses text[0..len); NULL on error with a message (with byte offset) in err. */
jv *jv_parse(const char *text, size_t len, char *err, size_t errlen);
/* Reads and parses a file; NULL with a message naming the file. */
jv *jv_load(const char *path, char *err, size_t errlen);
void jv_free(jv *v);
/* Member of an object by dotted path ("results.step_seconds.median"); NULL if absent. */
const jv *jv_path(const jv *v, const char *path);
const jv *jv_at(const jv *arr, int i);
/* The number at path, or dflt when absent or not a number. */
double jv_num(const jv *v, const char *path, double dflt);
/* The string at path, or dflt. */
const char *jv_str(const jv *v, const char *path, const char *dflt);

#endif
