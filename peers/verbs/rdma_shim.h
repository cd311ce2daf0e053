// A small C shim over rdma-core's libibverbs for the ibverbs backend
// (rdma_ibverbs.go, build tag ibverbs): one unreliable-connected queue
// pair, one completion queue, receive slots in one registered block.
// Compiled, never run (no RDMA device where it was written).
#include <infiniband/verbs.h>
#include <stdio.h>
#include <arpa/inet.h>

typedef struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *slots_mr;
	char *slots;
	int nslots, frame;
	struct ibv_mr *credit_mr;
	uint32_t credit_buf;
	int pending; // a completion polled by shim_pending, not yet returned
	struct ibv_wc held;
	struct ibv_port_attr port;
	union ibv_gid gid;
} shim_qp;

typedef struct ibv_mr shim_mr;

typedef struct {
	uint64_t wr_id;
	int status, recv, credit;
	uint32_t byte_len, imm;
} shim_wc;

static char shim_err[256];
static const char *shim_error(void) { return shim_err; }
static int shim_load(void) { return 0; }

static int shim_device_count(void) {
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (l) ibv_free_device_list(l);
	return n;
}

#define CREDIT_WR UINT64_MAX

static void shim_close(shim_qp *q) {
	if (q->qp) ibv_destroy_qp(q->qp);
	if (q->cq) ibv_destroy_cq(q->cq);
	if (q->slots_mr) ibv_dereg_mr(q->slots_mr);
	if (q->credit_mr) ibv_dereg_mr(q->credit_mr);
	if (q->pd) ibv_dealloc_pd(q->pd);
	if (q->ctx) ibv_close_device(q->ctx);
	free(q->slots);
	free(q);
}

static shim_qp *shim_open(int nslots, int frame) {
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l || n == 0) { snprintf(shim_err, sizeof shim_err, "no RDMA device"); if (l) ibv_free_device_list(l); return NULL; }
	shim_qp *q = calloc(1, sizeof *q);
	q->nslots = nslots; q->frame = frame;
	q->ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!q->ctx) { snprintf(shim_err, sizeof shim_err, "open device"); free(q); return NULL; }
	if (ibv_query_port(q->ctx, 1, &q->port) || ibv_query_gid(q->ctx, 1, 0, &q->gid)) { snprintf(shim_err, sizeof shim_err, "query port"); shim_close(q); return NULL; }
	q->pd = ibv_alloc_pd(q->ctx);
	q->cq = q->pd ? ibv_create_cq(q->ctx, 4 * nslots, NULL, NULL, 0) : NULL;
	if (!q->cq) { snprintf(shim_err, sizeof shim_err, "protection domain or completion queue"); shim_close(q); return NULL; }
	if (posix_memalign((void **)&q->slots, 4096, (size_t)nslots * frame)) { snprintf(shim_err, sizeof shim_err, "memory"); shim_close(q); return NULL; }
	q->slots_mr = ibv_reg_mr(q->pd, q->slots, (size_t)nslots * frame, IBV_ACCESS_LOCAL_WRITE);
	q->credit_mr = ibv_reg_mr(q->pd, &q->credit_buf, sizeof q->credit_buf, IBV_ACCESS_LOCAL_WRITE);
	if (!q->slots_mr || !q->credit_mr) { snprintf(shim_err, sizeof shim_err, "register memory"); shim_close(q); return NULL; }
	struct ibv_qp_init_attr ia = {0};
	ia.send_cq = q->cq; ia.recv_cq = q->cq; ia.qp_type = IBV_QPT_UC;
	ia.cap.max_send_wr = 2 * nslots; ia.cap.max_recv_wr = nslots; ia.cap.max_send_sge = 1; ia.cap.max_recv_sge = 1;
	q->qp = ibv_create_qp(q->pd, &ia);
	if (!q->qp) { snprintf(shim_err, sizeof shim_err, "create queue pair"); shim_close(q); return NULL; }
	struct ibv_qp_attr a = {0};
	a.qp_state = IBV_QPS_INIT; a.pkey_index = 0; a.port_num = 1; a.qp_access_flags = 0;
	if (ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) { snprintf(shim_err, sizeof shim_err, "queue pair to INIT"); shim_close(q); return NULL; }
	return q;
}

static uint32_t shim_qpn(shim_qp *q) { return q->qp->qp_num; }
static uint16_t shim_lid(shim_qp *q) { return q->port.lid; }
static void shim_gid(shim_qp *q, uint8_t *out) { memcpy(out, q->gid.raw, 16); }
static uint32_t shim_rkey(shim_qp *q) { return q->slots_mr->rkey; }
static uint64_t shim_addr(shim_qp *q) { return (uint64_t)(uintptr_t)q->slots; }

static int shim_connect(shim_qp *q, uint32_t qpn, uint32_t rpsn, uint32_t lpsn, uint16_t lid, uint8_t *gid) {
	struct ibv_qp_attr a = {0};
	a.qp_state = IBV_QPS_RTR; a.path_mtu = q->port.active_mtu; a.dest_qp_num = qpn; a.rq_psn = rpsn;
	a.ah_attr.dlid = lid; a.ah_attr.port_num = 1;
	if (lid == 0) { // RoCE / Thunderbolt: route by GID
		a.ah_attr.is_global = 1; memcpy(a.ah_attr.grh.dgid.raw, gid, 16); a.ah_attr.grh.hop_limit = 1; a.ah_attr.grh.sgid_index = 0;
	}
	if (ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN)) { snprintf(shim_err, sizeof shim_err, "queue pair to RTR"); return -1; }
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS; a.sq_psn = lpsn;
	if (ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) { snprintf(shim_err, sizeof shim_err, "queue pair to RTS"); return -1; }
	return 0;
}

static shim_mr *shim_reg(shim_qp *q, size_t size) {
	void *p = NULL;
	if (posix_memalign(&p, 4096, size)) { snprintf(shim_err, sizeof shim_err, "memory"); return NULL; }
	struct ibv_mr *mr = ibv_reg_mr(q->pd, p, size, IBV_ACCESS_LOCAL_WRITE);
	if (!mr) { free(p); snprintf(shim_err, sizeof shim_err, "register memory"); }
	return mr;
}

static void *shim_mr_addr(shim_mr *mr) { return mr->addr; }
static void *shim_slot(shim_qp *q, int slot) { return q->slots + (size_t)slot * q->frame; }

static int shim_post_send(shim_qp *q, shim_mr *mr, size_t off, int n, uint64_t wr_id) {
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr + off, .length = (uint32_t)n, .lkey = mr->lkey };
	struct ibv_send_wr wr = {0}, *bad = NULL;
	wr.wr_id = wr_id; wr.sg_list = &sge; wr.num_sge = 1; wr.opcode = IBV_WR_SEND; wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(q->qp, &wr, &bad)) { snprintf(shim_err, sizeof shim_err, "ibv_post_send"); return -1; }
	return 0;
}

// shim_post_credit tells the peer it may send n more frames: a SEND with
// immediate data and no payload.
static int shim_post_credit(shim_qp *q, uint32_t n) {
	struct ibv_send_wr wr = {0}, *bad = NULL;
	wr.wr_id = CREDIT_WR; wr.num_sge = 0; wr.opcode = IBV_WR_SEND_WITH_IMM; wr.imm_data = htonl(n); wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(q->qp, &wr, &bad)) { snprintf(shim_err, sizeof shim_err, "ibv_post_send (credit)"); return -1; }
	return 0;
}

static int shim_post_recv(shim_qp *q, int slot) {
	struct ibv_sge sge = { .addr = (uintptr_t)shim_slot(q, slot), .length = (uint32_t)q->frame, .lkey = q->slots_mr->lkey };
	struct ibv_recv_wr wr = {0}, *bad = NULL;
	wr.wr_id = (uint64_t)slot; wr.sg_list = &sge; wr.num_sge = 1;
	if (ibv_post_recv(q->qp, &wr, &bad)) { snprintf(shim_err, sizeof shim_err, "ibv_post_recv"); return -1; }
	return 0;
}

static int shim_pending(shim_qp *q) {
	if (q->pending) return 1;
	int n = ibv_poll_cq(q->cq, 1, &q->held);
	if (n > 0) q->pending = 1;
	return n != 0; // an error counts: Poll reports it
}

static int shim_poll(shim_qp *q, shim_wc *out) {
	struct ibv_wc wc;
	if (q->pending) { wc = q->held; q->pending = 0; }
	else {
		int n = ibv_poll_cq(q->cq, 1, &wc);
		if (n < 0) { snprintf(shim_err, sizeof shim_err, "ibv_poll_cq"); return -1; }
		if (n == 0) return 0;
	}
	out->wr_id = wc.wr_id; out->status = wc.status; out->byte_len = wc.byte_len;
	out->recv = (wc.opcode & IBV_WC_RECV) != 0;
	out->credit = !out->recv && wc.wr_id == CREDIT_WR;
	out->imm = (wc.wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc.imm_data) : 0;
	return 1;
}
