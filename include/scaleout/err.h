/* Error codes and the per-thread error message of libscaleout.
 * Every library function that can fail returns 0 or a negative SO_E* code and
 * leaves a one-line explanation in so_errmsg(); the library never exits. */
#ifndef SCALEOUT_ERR_H
#define SCALEOUT_ERR_H

enum {
    SO_OK = 0,
    SO_EINVAL = -1,   /* bad argument or configuration */
    SO_EIO = -2,      /* a file could not be opened, read or written */
    SO_EFORMAT = -3,  /* a file's content is malformed */
    SO_ENOMEM = -4,   /* allocation failed */
    SO_EBACKEND = -5, /* the compute backend (oneDNN) failed */
    SO_EUNSUP = -6,   /* valid request this build does not support */
    SO_ECOMM = -7,    /* communication failed or timed out */
    SO_ENUMERIC = -8, /* training produced a NaN or an infinity */
    SO_STOP = 1       /* not an error: a hook asked training to stop cleanly */
};

/* Sets the thread's message (printf format) and returns `code`, so callers can
 * write `return so_err(SO_EINVAL, "bad batch size %d", n);`. */
int so_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The last message set on this thread ("" if none). Valid until the next so_err. */
const char *so_errmsg(void);

/* A short name for an error code ("invalid argument", ...). */
const char *so_strerror(int code);

#endif
