/* Private to libscaleout_comm: the set-up of scaleout's TCP transports
 * (tcp_conn.c), used by the ring of hier's step across nodes (tcp.c) and by
 * the point-to-point mesh of pipeline stages (tcp_p2p.c). The bytes on the
 * wire and their checks are in tcp_wire.h. */
#ifndef SCALEOUT_TCP_INTERNAL_H
#define SCALEOUT_TCP_INTERNAL_H

#include "coll_internal.h"
#include "tcp_wire.h"

#include <poll.h>
#include <stdint.h>

#define TCP_MAX_ADDRS 8                  /* IPv4 addresses a member offers */
#define TCP_CONNECT_TIMEOUT_MS 2000      /* per address tried */
#define TCP_HANDSHAKE_TIMEOUT_MS 5000    /* a connection's whole handshake, either side */
#define TCP_IO_MAX ((size_t)4 << 20)     /* bytes per send()/recv() call */
#define TCP_ADDR_LEN 24                  /* "255.255.255.255:65535" */

/* What a member publishes to the others (MPI_Allgather). */
typedef struct {
    uint32_t addr[TCP_MAX_ADDRS + 1]; /* network order; loopback last */
    uint32_t naddr;
    uint16_t port;                    /* network order; 0: not listening */
    uint16_t pad;
} tcp_card;

/* The connections one set-up made within a group, and how to name each
 * member in messages: its world rank (what mpirun shows) and the address of
 * its end of the connection. */
typedef struct {
    int n, me;                       /* members, my position */
    int *out, *in;                   /* [n] my connection to / from member j, -1: none */
    int *world;                      /* [n] world ranks */
    char (*out_addr)[TCP_ADDR_LEN];  /* [n] the address I called member j at */
    char (*in_addr)[TCP_ADDR_LEN];   /* [n] the address member j called me from */
} tcp_links;

/* Picks the connections of a set-up from everyone's cards: call[j] = 1 when I
 * call member j, expect[j] = 1 when member j calls me (the same rule on every
 * member, so every call is expected). */
typedef void tcp_plan_fn(const tcp_card *cards, int n, int me, unsigned char *call, unsigned char *expect);

/* Collective over comm: a fresh secret from rank 0 (getrandom, broadcast over
 * MPI, wiped when set-up ends), the cards exchanged, every planned connection
 * made and authenticated in both directions (tcp_wire.h), strangers closed
 * and counted, then one agreement: *all_ok = 1 on every member when every
 * member connected; else every link is closed and a warning logged (the
 * caller stays on MPI). name prefixes messages ("tcp ring"). Returns an error
 * only when MPI fails. Free links with tcp_links_close (also on error). */
int tcp_setup(MPI_Comm comm, so_waiter *w, uint16_t kind, const char *name, tcp_plan_fn *plan, tcp_links *links,
              int *all_ok);
void tcp_links_close(tcp_links *l);
/* "rank 3 (10.0.0.2:40123)": member j by world rank and the address of its
 * connection to me (incoming = 1) or of mine to it. */
void tcp_peer_name(const tcp_links *l, int j, int incoming, char *buf, size_t len);

/* Whether scaleout's TCP transport is on (SCALEOUT_COLL_TCP: 1, or auto when
 * the job spans hosts). */
int tcp_enabled(void);
/* Whether two cards share an address other than loopback (or both have none). */
int tcp_same_host(const tcp_card *a, const tcp_card *b);
/* n bytes from the kernel's random source (getrandom); 0 or -1. */
int tcp_random(void *buf, size_t n);

/* Test-only (SCALEOUT_TCP_TEST_GARBAGE=RANK[:size], src/core/test_hooks.h):
 * 0 normally; on that world rank, what its first message after set-up
 * carries instead of a valid header: 1 random bytes, 2 a valid header with
 * a length of 2^31. */
int tcp_test_garbage(void);


/* ---- a group's point-to-point mesh (tcp_p2p.c) ------------------------------------
 * Two users: the pipeline's messages (so_tcp_mesh_open: peers on other hosts,
 * a progress thread of its own) and the collectives' tcp transport
 * (so_tcp_mesh_open_polled, tp_tcp.c: every pair, moved by whoever tests). */
typedef struct so_tcp_mesh so_tcp_mesh;
typedef struct so_tcp_msg so_tcp_msg;
/* Collective over comm: connections to every peer on another host (every
 * peer when SCALEOUT_COLL_TCP=1) and the progress thread. *out = NULL when
 * some rank could not connect (agreed; a warning logged): MPI then. */
int so_tcp_mesh_open(MPI_Comm comm, so_waiter *w, so_tcp_mesh **out);
/* Collective over comm: a connection each way with every other member and no
 * thread; the owner moves messages with so_tcp_mesh_progress. NULL as above. */
int so_tcp_mesh_open_polled(MPI_Comm comm, so_waiter *w, so_tcp_mesh **out);
/* Moves what can move on every connection, waiting up to timeout_ms for one
 * to be ready; SO_ECOMM (why) once the mesh failed. Polled meshes only. */
int so_tcp_mesh_progress(so_tcp_mesh *t, int timeout_ms);
void so_tcp_mesh_free(so_tcp_mesh *t);
/* Whether messages with peer go over the mesh. */
int so_tcp_mesh_has(const so_tcp_mesh *t, int peer);
/* "rank 3 (10.0.0.2:40123)": peer as messages name it. */
void so_tcp_mesh_peer_name(const so_tcp_mesh *t, int peer, char *buf, size_t len);
/* Posts a send (sending = 1) or receive of bytes with peer and tag; matching
 * and the buffer's ownership as so_comm_isend / irecv. */
int so_tcp_mesh_post(so_tcp_mesh *t, void *buf, size_t bytes, int peer, int tag, int sending, so_tcp_msg **out);
/* *done = 1 once m completed; SO_ECOMM once the mesh failed. m is freed by the caller (free). */
int so_tcp_msg_test(so_tcp_mesh *t, so_tcp_msg *m, int *done);
/* Waits for m, watched by w. */
int so_tcp_msg_wait(so_tcp_mesh *t, so_tcp_msg *m, so_waiter *w);

#endif
