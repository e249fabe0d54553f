/*
 * Live looks at jobs the node daemons hold, at the central daemon
 * (docs/HTTP-API.md, "Jobs the node daemons hold"): GET
 * /v1/jobs/<job>/stacks asks every connected node that holds ranks of the
 * job (NODE_LOOK_REQUEST), merges the classes of stacks they answer with
 * (NODE_LOOK_STACKS; look_merge.c) and answers in look.c's JSON shape, the
 * ranks of lost nodes and of nodes that did not answer in `missing` and
 * `why`. GET .../ranks/<r>/stacks and .../trace go to the rank's node,
 * whose answer (NODE_SUMMARY with LOOK) is relayed as it is. The HTTP
 * thread hands requests to the loop (handover.c); every look ends by
 * NODE_LOOK_DEADLINE_NS.
 */
#ifndef FR_DAEMON_NODE_LOOK_H
#define FR_DAEMON_NODE_LOOK_H

#include <stdbool.h>
#include <stdint.h>

#include "look.h"

struct conn;
struct fr_msg_node_look_stacks;
struct fr_msg_node_summary;

/* A node's own look ends within LOOK_TIMEOUT_NS; its answer has this
 * long more to arrive. */
#define NODE_LOOK_DEADLINE_NS (LOOK_TIMEOUT_NS + 1ull * NS_PER_S)
/* Looks through the nodes at once; more are answered 503. */
#define NODE_LOOKS_MAX 16

/* Before the HTTP threads exist; node_look_stop() after handover_stop(). */
int node_look_start(struct flightrecd *d);
void node_look_stop(struct flightrecd *d);
/*
 * Whether request `r` (its *req_cls as look_http() got it) is one for the
 * nodes: a job no rank of which is connected here that a node holds, or
 * a request node_look_http() handed over.
 */
bool node_look_claims(struct flightrecd *d, const struct route *r, void *req_cls);
/* The HTTP handler of the three look routes for such a job; returns an enum MHD_Result. */
int node_look_http(struct flightrecd *d, struct MHD_Connection *mc, const struct route *r,
		   uint32_t last, void **req_cls);
/* A node's NODE_LOOK_STACKS (taken: *m is zeroed) and NODE_SUMMARY with LOOK. Under the lock. */
void node_look_stacks(struct flightrecd *d, struct conn *c, struct fr_msg_node_look_stacks *m);
void node_look_piece(struct flightrecd *d, struct conn *c, const struct fr_msg_node_summary *m);
/* A node's connection closed: what its looks waited for from it is lost. Under the lock. */
void node_look_conn_closed(struct conn *c);

#endif
