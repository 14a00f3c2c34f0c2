/* A minimal streaming JSON writer: objects, arrays, strings (escaped),
 * numbers. Tracks nesting and commas so callers write values in order.
 * Used for --json result files, traces and benchmark records. */
#ifndef SCALEOUT_JSON_H
#define SCALEOUT_JSON_H
#include <stdint.h>
#include <stdio.h>

#define SO_JSON_DEPTH 16

typedef struct {
    FILE *f;
    int depth;
    int count[SO_JSON_DEPTH]; /* values written at each depth, for commas */
    int pretty;
} so_json;

void so_json_init(so_json *j, FILE *f, int pretty);
void so_json_obj_begin(so_json *j, const char *key);   /* key NULL inside arrays / at top */
void so_json_obj_end(so_json *j);
void so_json_arr_begin(so_json *j, const char *key);
void so_json_arr_end(so_json *j);
void so_json_str(so_json *j, const char *key, const char *v);
void so_json_num(so_json *j, const char *key, double v);   /* non-finite values become null */
void so_json_int(so_json *j, const char *key, int64_t v);
void so_json_bool(so_json *j, const char *key, int v);
void so_json_null(so_json *j, const char *key);

#endif
