/* A small MPI program with a known number of calls per kind and size, for
 * the PMPI library test (tests/pmpi_cli.sh): every rank makes
 *   5 MPI_Allreduce of 100 ints (400 B), 3 MPI_Bcast of 1000 bytes,
 *   2 MPI_Iallreduce of 8 doubles (64 B) completed by MPI_Wait,
 *   4 MPI_Sendrecv of 16 bytes around a ring, 1 MPI_Isend + 1 MPI_Irecv of
 *   32 bytes completed by MPI_Waitall, 1 MPI_Barrier, 1 MPI_Alltoall of 2 ints
 *   per rank, 1 MPI_Allgather of 3 ints per rank, 1 MPI_Reduce_scatter_block
 *   of 4 floats per rank,
 * and checks the results, exiting 1 on a wrong one. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, p, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    int v[100];
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < 100; i++)
            v[i] = rank + i;
        MPI_Allreduce(MPI_IN_PLACE, v, 100, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        bad |= v[7] != p * (p - 1) / 2 + 7 * p;
    }
    char b[1000];
    for (int k = 0; k < 3; k++) {
        b[999] = rank == 0 ? (char)k : -1;
        MPI_Bcast(b, 1000, MPI_CHAR, 0, MPI_COMM_WORLD);
        bad |= b[999] != (char)k;
    }
    for (int k = 0; k < 2; k++) {
        double d[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        MPI_Request q;
        MPI_Iallreduce(MPI_IN_PLACE, d, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        bad |= d[3] != p;
    }
    int right = (rank + 1) % p, left = (rank + p - 1) % p;
    for (int k = 0; k < 4; k++) {
        char s[16] = {(char)rank}, r[16];
        MPI_Sendrecv(s, 16, MPI_CHAR, right, 1, r, 16, MPI_CHAR, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad |= r[0] != (char)left;
    }
    char s32[32] = {(char)rank}, r32[32];
    MPI_Request q2[2];
    MPI_Irecv(r32, 32, MPI_CHAR, left, 2, MPI_COMM_WORLD, &q2[0]);
    MPI_Isend(s32, 32, MPI_CHAR, right, 2, MPI_COMM_WORLD, &q2[1]);
    MPI_Status st2[2]; /* not MPI_STATUSES_IGNORE: GCC 12 misreads MPICH's annotation of it */
    MPI_Waitall(2, q2, st2);
    bad |= r32[0] != (char)left;
    MPI_Barrier(MPI_COMM_WORLD);
    int *a = malloc(sizeof(int) * 2 * (size_t)p), *z = malloc(sizeof(int) * 3 * (size_t)p);
    float *f = malloc(sizeof(float) * 4 * (size_t)p), g[4];
    for (int i = 0; i < 2 * p; i++)
        a[i] = rank;
    for (int i = 0; i < 4 * p; i++)
        f[i] = 1;
    MPI_Alltoall(MPI_IN_PLACE, 2, MPI_INT, a, 2, MPI_INT, MPI_COMM_WORLD);
    int mine[3] = {rank, rank, rank};
    MPI_Allgather(mine, 3, MPI_INT, z, 3, MPI_INT, MPI_COMM_WORLD);
    MPI_Reduce_scatter_block(f, g, 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    bad |= z[3 * (p - 1)] != p - 1 || g[2] != p;
    free(a);
    free(z);
    free(f);
    if (bad)
        fprintf(stderr, "pmpi_prog: rank %d: wrong result\n", rank);
    MPI_Finalize();
    return bad;
}
