/* Which transport object serves a communicator: each kind is made on first
 * use (collective over the communicator) and cached on it as an attribute,
 * so it is freed with the communicator, as MPICH caches its node
 * sub-communicators. The top of the transport layer: it knows every one. */
#include "tp.h"

#include "scaleout/err.h"
#include "scaleout/log.h"

static int keys[SO_TRANSPORT_COUNT] = {MPI_KEYVAL_INVALID, MPI_KEYVAL_INVALID, MPI_KEYVAL_INVALID,
                                       MPI_KEYVAL_INVALID};

/* Attribute delete callback: the communicator is being freed (collective). */
static int tp_delete(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)comm, (void)key, (void)extra;
    so_tp *t = val;
    t->ops->free(t);
    return MPI_SUCCESS;
}

static int make(MPI_Comm comm, so_transport kind, so_waiter *w, so_tp **out)
{
    switch (kind) {
    case SO_TRANSPORT_SHM: return so_tp_shm_new(comm, w, out);
    case SO_TRANSPORT_TCP: return so_tp_tcp_new(comm, w, out);
    default: return so_tp_mpi_new(comm, out);
    }
}

int so_tp_get(MPI_Comm comm, so_transport kind, so_waiter *w, so_tp **out)
{
    int rc = 0, flag = 0;
    void *val;
    if (kind == SO_TRANSPORT_AUTO)
        kind = SO_TRANSPORT_MPI;
    if ((unsigned)kind >= SO_TRANSPORT_COUNT)
        return so_err(SO_EINVAL, "invalid transport %d", (int)kind);
    /* SERIALIZED: one thread in MPI at a time, so this lazy set-up cannot race. */
    if (keys[kind] == MPI_KEYVAL_INVALID)
        SO_MPI_TRY(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, tp_delete, &keys[kind], NULL));
    SO_MPI_TRY(MPI_Comm_get_attr(comm, keys[kind], &val, &flag));
    if (flag) {
        *out = val;
        return 0;
    }
    if ((rc = make(comm, kind, w, out)))
        return rc;
    int mrc = MPI_Comm_set_attr(comm, keys[kind], *out);
    if (mrc != MPI_SUCCESS) {
        (*out)->ops->free(*out);
        *out = NULL;
        return so_mpi_err(mrc, "MPI_Comm_set_attr");
    }
out:
    return rc;
}

/* Marks a communicator whose tcp set-up was refused (some rank could not
 * connect), so later asks take MPI without trying, and warning, again. */
static int refused_key = MPI_KEYVAL_INVALID;

int so_tp_tcp_or_mpi(MPI_Comm comm, so_waiter *w, const char *what, so_tp **out)
{
    int rc = 0, flag = 0;
    void *val;
    if (refused_key == MPI_KEYVAL_INVALID)
        SO_MPI_TRY(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &refused_key, NULL));
    SO_MPI_TRY(MPI_Comm_get_attr(comm, refused_key, &val, &flag));
    if (!flag) {
        rc = so_tp_get(comm, SO_TRANSPORT_TCP, w, out);
        if (rc != SO_EUNSUP)
            return rc;
        so_log(SO_LOG_WARN, "%s; %s stay on MPI", so_errmsg(), what);
        SO_MPI_TRY(MPI_Comm_set_attr(comm, refused_key, &refused_key));
    }
    return so_tp_get(comm, SO_TRANSPORT_MPI, w, out);
out:
    return rc;
}
