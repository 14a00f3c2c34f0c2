/* The MPI library's version string for benchmark records (environment
 * section of --json files): which MPI a result was measured with. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "scaleout/comm.h"
#include "scaleout/err.h"

int so_comm_library_version(char *buf, size_t len)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    if (!buf || !len || MPI_Get_library_version(v, &n) != MPI_SUCCESS)
        return so_err(SO_EINVAL, "MPI_Get_library_version failed");
    v[n < MPI_MAX_LIBRARY_VERSION_STRING ? n : MPI_MAX_LIBRARY_VERSION_STRING - 1] = 0;
    /* Open MPI and MPICH print several lines; the first names library and version. */
    v[strcspn(v, "\r\n")] = 0;
    snprintf(buf, len, "%s", v);
    return 0;
}
