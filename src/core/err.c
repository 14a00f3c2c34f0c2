/* Per-thread error message storage behind so_err()/so_errmsg(). Thread-local
 * so the loader's prefetch thread and the communication thread never clobber
 * the training thread's message. A caller may wrap the message it got:
 * so_err(rc, "--flag: %s", so_errmsg()) formats from the buffer it writes, so
 * the text is formatted aside and copied in (vsnprintf with overlapping
 * source and destination is undefined and printed "--flag: --flag: er ..."). */
#include "scaleout/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char errbuf[512];

int so_err(int code, const char *fmt, ...)
{
    char msg[sizeof errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(errbuf, msg, sizeof errbuf);
    return code;
}

const char *so_errmsg(void) { return errbuf; }

const char *so_strerror(int code)
{
    switch (code) {
    case SO_OK: return "ok";
    case SO_EINVAL: return "invalid argument";
    case SO_EIO: return "I/O error";
    case SO_EFORMAT: return "malformed file";
    case SO_ENOMEM: return "out of memory";
    case SO_EBACKEND: return "backend failure";
    case SO_EUNSUP: return "unsupported";
    case SO_ECOMM: return "communication failure";
    case SO_ENUMERIC: return "non-finite values";
    default: return "unknown error";
    }
}
