/* Private to libscaleout_comm: the set-up pieces of scaleout's TCP
 * transports (tcp_conn.c), used by the ring of hier's step across nodes
 * (tcp.c) and by the point-to-point mesh of pipeline stages (tcp_p2p.c). */
#ifndef SCALEOUT_TCP_INTERNAL_H
#define SCALEOUT_TCP_INTERNAL_H

#include "coll_internal.h"

#include <poll.h>
#include <stdint.h>

#define TCP_MAX_ADDRS 8                  /* IPv4 addresses a member offers */
#define TCP_CONNECT_TIMEOUT_MS 2000      /* per address tried */
#define TCP_IO_MAX ((size_t)4 << 20)     /* bytes per send()/recv() call */
#define HELLO_MAGIC 0x5c7c9a11u

/* What a member publishes to the others (MPI_Allgather). */
typedef struct {
    uint32_t addr[TCP_MAX_ADDRS + 1]; /* network order; loopback last */
    uint32_t naddr;
    uint16_t port;                    /* network order; 0: not listening */
    uint16_t pad;
} tcp_card;

/* First bytes on a connection: who is calling, for which job. */
typedef struct {
    uint32_t magic, from;
    uint64_t token;
} tcp_hello;

/* My IPv4 addresses (SCALEOUT_TCP_IF: one interface's), loopback last. */
void tcp_my_addrs(tcp_card *c);
/* A non-blocking listening socket on every interface, port chosen by the kernel; fd or -1. */
int tcp_listen_any(uint16_t *port);
/* Waits until fd is ready for events before deadline (so_now() time); 0 or -1. */
int tcp_wait_fd(int fd, short events, double deadline);
/* Writes (reads) exactly len bytes on a non-blocking socket before deadline; 0 or -1. */
int tcp_io_all(int fd, void *buf, size_t len, int writing, double deadline);
/* Connects to one of c's addresses (never my own listener, me) and says hello; fd or -1. */
int tcp_call(const tcp_card *c, const tcp_card *me, const tcp_hello *hello, double deadline);
/* Accepts until member want (-1: any) of this job says hello; fd (caller in *from) or -1. */
int tcp_answer(int lfd, int want, uint64_t token, double deadline, int *from);
/* The same value on every member, different for every job. */
uint64_t tcp_job_token(const tcp_card *cards, int n);
/* Every member's card (collective over comm). */
int tcp_exchange_cards(MPI_Comm comm, const tcp_card *mine, tcp_card *all, so_waiter *w);
/* *all_ok = the minimum of ok over comm (collective). */
int tcp_agree(MPI_Comm comm, int ok, so_waiter *w, int *all_ok);
/* How long to wait for a caller with card c: its tries of every address and a grace. */
double tcp_accept_deadline(const tcp_card *c, double deadline);
/* Whether scaleout's TCP transport is on (SCALEOUT_COLL_TCP: 1, or auto when
 * the job spans hosts). */
int tcp_enabled(void);
/* Whether two cards share an address other than loopback (or both have none). */
int tcp_same_host(const tcp_card *a, const tcp_card *b);


/* ---- a group's point-to-point mesh (tcp_p2p.c) ------------------------------------ */
typedef struct so_tcp_mesh so_tcp_mesh;
typedef struct so_tcp_msg so_tcp_msg;
/* Collective over comm: connections to every peer on another host (every
 * peer when SCALEOUT_COLL_TCP=1) and the progress thread. *out = NULL when
 * some rank could not connect (agreed; a warning logged): MPI then. */
int so_tcp_mesh_open(MPI_Comm comm, so_waiter *w, so_tcp_mesh **out);
void so_tcp_mesh_free(so_tcp_mesh *t);
/* Whether messages with peer go over the mesh. */
int so_tcp_mesh_has(const so_tcp_mesh *t, int peer);
/* Posts a send (sending = 1) or receive of bytes with peer and tag; matching
 * and the buffer's ownership as so_comm_isend / irecv. */
int so_tcp_mesh_post(so_tcp_mesh *t, void *buf, size_t bytes, int peer, int tag, int sending, so_tcp_msg **out);
/* *done = 1 once m completed; SO_ECOMM once the mesh failed. m is freed by the caller (free). */
int so_tcp_msg_test(so_tcp_mesh *t, so_tcp_msg *m, int *done);
/* Waits for m, watched by w. */
int so_tcp_msg_wait(so_tcp_mesh *t, so_tcp_msg *m, so_waiter *w);

#endif
