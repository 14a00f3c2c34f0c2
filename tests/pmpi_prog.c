/* A small MPI program with a known number of calls per kind and size, for
 * the PMPI library test (tests/pmpi_cli.sh): every rank makes
 *   5 MPI_Allreduce of 100 ints (400 B), 3 MPI_Bcast of 1000 bytes,
 *   2 MPI_Iallreduce of 8 doubles (64 B) completed by MPI_Wait,
 *   4 MPI_Sendrecv of 16 bytes around a ring, 1 MPI_Isend + 1 MPI_Irecv of
 *   32 bytes completed by MPI_Waitall, 1 MPI_Barrier, 1 MPI_Alltoall of 2 ints
 *   per rank, 1 MPI_Allgather of 3 ints per rank, 1 MPI_Reduce_scatter_block
 *   of 4 floats per rank,
 *   2 MPI_Ibcast of 200 bytes completed by MPI_Waitany, 2 MPI_Iallgather of 5
 *   ints per rank by MPI_Waitsome, 2 MPI_Ialltoall of 1 int per rank by
 *   MPI_Testany, 2 MPI_Ireduce_scatter_block of 2 floats per rank by
 *   MPI_Testsome, 3 MPI_Startall of a persistent MPI_Send_init/MPI_Recv_init
 *   pair of 48 bytes,
 *   and with MPI 4 (rank 0 prints "persistent collectives: yes"): 4 MPI_Start
 *   of an MPI_Allreduce_init of 10 doubles, 2 of an MPI_Bcast_init of 300
 *   bytes and 1 of an MPI_Barrier_init,
 * and checks the results, exiting 1 on a wrong one. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* Two requests of each kind, completed by the four Wait/Test-any/some calls. */
static int any_some(int rank, int p)
{
    int bad = 0, idx[2], n, flag, done;
    MPI_Request q[2];
    char b[2][200];
    for (int i = 0; i < 2; i++) {
        b[i][199] = rank == 0 ? (char)(i + 5) : 0;
        MPI_Ibcast(b[i], 200, MPI_CHAR, 0, MPI_COMM_WORLD, &q[i]);
    }
    for (int k = 0; k < 2; k++)
        MPI_Waitany(2, q, &idx[0], MPI_STATUS_IGNORE);
    bad |= b[0][199] != 5 || b[1][199] != 6;
    int mine[5] = {rank, rank, rank, rank, rank}, *all = malloc(sizeof(int) * 10 * (size_t)p);
    for (int i = 0; i < 2; i++)
        MPI_Iallgather(mine, 5, MPI_INT, all + 5 * p * i, 5, MPI_INT, MPI_COMM_WORLD, &q[i]);
    MPI_Status st[2];
    for (done = 0; done < 2; done += n)
        MPI_Waitsome(2, q, &n, idx, st);
    bad |= all[5 * p + 5 * (p - 1)] != p - 1;
    int *a = malloc(sizeof(int) * 2 * (size_t)p), *z = malloc(sizeof(int) * 2 * (size_t)p);
    for (int i = 0; i < 2 * p; i++)
        a[i] = rank;
    for (int i = 0; i < 2; i++)
        MPI_Ialltoall(a + p * i, 1, MPI_INT, z + p * i, 1, MPI_INT, MPI_COMM_WORLD, &q[i]);
    for (done = 0; done < 2;) {
        MPI_Testany(2, q, &idx[0], &flag, MPI_STATUS_IGNORE);
        done += flag && idx[0] != MPI_UNDEFINED;
    }
    bad |= z[p + p - 1] != p - 1;
    float *f = malloc(sizeof(float) * 4 * (size_t)p), g[4];
    for (int i = 0; i < 4 * p; i++)
        f[i] = 1;
    for (int i = 0; i < 2; i++)
        MPI_Ireduce_scatter_block(f + 2 * p * i, g + 2 * i, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q[i]);
    for (done = 0; done < 2; done += n == MPI_UNDEFINED ? 0 : n)
        MPI_Testsome(2, q, &n, idx, st);
    bad |= g[3] != p;
    free(all);
    free(a);
    free(z);
    free(f);
    return bad;
}

/* Persistent point-to-point and (MPI 4) collective requests, started repeatedly. */
static int persistent(int rank, int p)
{
    int bad = 0, right = (rank + 1) % p, left = (rank + p - 1) % p;
    char s[48], r[48];
    MPI_Request q[2];
    MPI_Status st[2];
    MPI_Recv_init(r, 48, MPI_CHAR, left, 3, MPI_COMM_WORLD, &q[0]);
    MPI_Send_init(s, 48, MPI_CHAR, right, 3, MPI_COMM_WORLD, &q[1]);
    for (int k = 0; k < 3; k++) {
        s[0] = (char)(rank + k);
        MPI_Startall(2, q);
        MPI_Waitall(2, q, st);
        bad |= r[0] != (char)(left + k);
    }
    MPI_Request_free(&q[0]);
    MPI_Request_free(&q[1]);
#if MPI_VERSION >= 4
    double d[10];
    char b[300];
    MPI_Allreduce_init(MPI_IN_PLACE, d, 10, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]);
    for (int k = 0; k < 4; k++) {
        d[9] = k;
        MPI_Start(&q[0]);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        bad |= d[9] != k * p;
    }
    MPI_Request_free(&q[0]);
    MPI_Bcast_init(b, 300, MPI_CHAR, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &q[0]);
    MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &q[1]);
    for (int k = 0; k < 2; k++) {
        b[299] = rank == 0 ? (char)(k + 1) : 0;
        MPI_Start(&q[0]);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        bad |= b[299] != (char)(k + 1);
    }
    MPI_Start(&q[1]);
    MPI_Wait(&q[1], MPI_STATUS_IGNORE);
    MPI_Request_free(&q[0]);
    MPI_Request_free(&q[1]);
    if (rank == 0)
        printf("persistent collectives: yes\n");
#endif
    return bad;
}

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
    bad |= any_some(rank, p);
    bad |= persistent(rank, p);
    if (bad)
        fprintf(stderr, "pmpi_prog: rank %d: wrong result\n", rank);
    MPI_Finalize();
    return bad;
}
