# scaleout's TCP transports without sockets or MPI: SHA-256 / HMAC-SHA256
# against the FIPS 180-4 and RFC 4231 vectors, the handshake and framing
# checks of src/comm/tcp_wire.c (compiled in: it needs no MPI).
include_guard(GLOBAL)
so_add_test(test_tcp_wire LABELS unit SOURCES ${CMAKE_SOURCE_DIR}/src/comm/tcp_wire.c)
