/* gpu_graph: CUDA-graph capture and replay of the layer stack (gpu_run_layers), one graph per
 * row count of a decode step and per verify-window size, captured once at gpu_model_create. */
#include "gpu_internal.h"

#include <stdlib.h>

#include "common/err.h"
#include "common/log.h"
#include "common/xalloc.h"

/* Launch gaps dominate a decode step (~600 small kernels for 40 layers), so every row count
 * of a decode step (n items of one token each) gets its own graph of the whole stack. Kernel
 * arguments are device pointers into fixed buffers (d_in carries the per-step tokens,
 * positions, tables and the gdn_seq item table), so one capture serves every later step of that
 * many rows. */
/* Kernel nodes of a captured graph (-1 when the graph cannot be read). */
static int count_kernels(cudaGraph_t graph)
{
    size_t n = 0;
    if (cudaGraphGetNodes(graph, NULL, &n) != cudaSuccess)
        return -1;
    cudaGraphNode_t *nodes = xcalloc(n ? n : 1, sizeof *nodes);
    int k = 0;
    if (cudaGraphGetNodes(graph, nodes, &n) != cudaSuccess) {
        k = -1;
    } else {
        for (size_t i = 0; i < n; i++) {
            enum cudaGraphNodeType t;
            if (cudaGraphNodeGetType(nodes[i], &t) == cudaSuccess && t == cudaGraphNodeTypeKernel)
                k++;
        }
    }
    free(nodes);
    return k;
}

/* The programmatic edges of a captured graph (a kernel launched with kcuda_launch_pdl after
 * another kernel: kernels/internal/pdl.cuh) into *count; with full set each is first replaced by
 * a full edge (the next kernel placed only once the one before has completed), leaving 0. */
static cudaError_t pdl_edges(cudaGraph_t graph, bool full, int *count)
{
    size_t n = 0;
    cudaError_t e = cudaGraphGetEdges(graph, NULL, NULL, NULL, &n);
    if (e != cudaSuccess)
        return e;
    cudaGraphNode_t *from = xcalloc(n ? n : 1, sizeof *from);
    cudaGraphNode_t *to = xcalloc(n ? n : 1, sizeof *to);
    cudaGraphEdgeData *d = xcalloc(n ? n : 1, sizeof *d);
    e = cudaGraphGetEdges(graph, from, to, d, &n);
    size_t m = 0; /* the programmatic ones, moved to the front */
    for (size_t i = 0; e == cudaSuccess && i < n; i++) {
        if (d[i].type == cudaGraphDependencyTypeDefault &&
            d[i].from_port == cudaGraphKernelNodePortDefault)
            continue;
        from[m] = from[i];
        to[m] = to[i];
        d[m++] = d[i];
    }
    if (e == cudaSuccess && full && m > 0) {
        e = cudaGraphRemoveDependencies(graph, from, to, d, m);
        if (e == cudaSuccess)
            e = cudaGraphAddDependencies(graph, from, to, NULL, m);
        m = 0;
    }
    *count = (int)m;
    free(from);
    free(to);
    free(d);
    return e;
}

/* Capture one pass of rows rows in items items (the longest max_n rows) into *exec. */
static int capture_one(struct gpu_model *g, int rows, int items, int max_n, cudaGraphExec_t *exec,
                       int *kernels, int *edges)
{
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal);
    struct gpu_pass p;
    gpu_pass_main(g, &p, rows, items, g->bps, g->o.max_model_len);
    p.max_n = max_n;
    int rc = e == cudaSuccess ? gpu_run_layers(g, &p) : ERR_CUDA;
    if (e == cudaSuccess) {
        cudaError_t e2 = cudaStreamEndCapture(g->stream, &graph);
        if (e2 != cudaSuccess)
            e = e2;
    }
    int n_edges = 0;
    if (e == cudaSuccess && rc == 0)
        e = pdl_edges(graph, g->o.pdl < 0, &n_edges);
    if (e == cudaSuccess && rc == 0)
        e = cudaGraphInstantiate(exec, graph, 0);
    if (e == cudaSuccess && rc == 0) {
        *kernels = count_kernels(graph);
        if (edges)
            *edges = n_edges;
    }
    if (graph)
        cudaGraphDestroy(graph);
    if (e != cudaSuccess || rc < 0) {
        LOG_WARN("gpu_graphs_off", "rows=%d items=%d err=\"%s\" status=%s note=\"eager launches\"",
                 rows, items, cudaGetErrorString(e), err_str(rc));
        (void)cudaGetLastError();
        return rc < 0 ? rc : ERR_CUDA;
    }
    return 0;
}

int gpu_capture_graphs(struct gpu_model *g)
{
    g->graphs = xcalloc((size_t)g->o.n_slots + 1, sizeof *g->graphs);
    g->graph_kernels = xcalloc((size_t)g->o.n_slots + 1, sizeof *g->graph_kernels);
    g->graph_pdl_edges = xcalloc((size_t)g->o.n_slots + 1, sizeof *g->graph_pdl_edges);
    int rc = 0;
    for (int n = 1; n <= g->o.n_slots && rc == 0; n++)
        rc = capture_one(g, n, n, 1, &g->graphs[n], &g->graph_kernels[n], &g->graph_pdl_edges[n]);
    if (rc == 0 && g->n_snap > 1) {
        /* verify windows: one item of k+1 rows; any single item of that many rows may replay
         * them (the snapshot index is d_in's, -1 for an item without) */
        g->wgraphs = xcalloc((size_t)g->n_snap + 1, sizeof *g->wgraphs);
        g->wgraph_kernels = xcalloc((size_t)g->n_snap + 1, sizeof *g->wgraph_kernels);
        for (int n = 2; n <= g->n_snap && n <= g->R && rc == 0; n++)
            rc = capture_one(g, n, 1, n, &g->wgraphs[n], &g->wgraph_kernels[n], NULL);
    }
    if (rc < 0) {
        gpu_destroy_graphs(g);
        return rc;
    }
    g->use_graphs = true;
    return 0;
}

void gpu_destroy_graphs(struct gpu_model *g)
{
    for (int n = 0; g->graphs && n <= g->o.n_slots; n++)
        if (g->graphs[n])
            cudaGraphExecDestroy(g->graphs[n]);
    for (int n = 0; g->wgraphs && n <= g->n_snap; n++)
        if (g->wgraphs[n])
            cudaGraphExecDestroy(g->wgraphs[n]);
    free(g->graphs);
    free(g->graph_kernels);
    free(g->graph_pdl_edges);
    free(g->wgraphs);
    free(g->wgraph_kernels);
    g->graphs = NULL;
    g->graph_kernels = NULL;
    g->graph_pdl_edges = NULL;
    g->wgraphs = NULL;
    g->wgraph_kernels = NULL;
    g->use_graphs = false;
}

int gpu_model_graph_kernels(const struct gpu_model *g, int n)
{
    return g->graphs && n >= 1 && n <= g->o.n_slots ? g->graph_kernels[n] : -1;
}

int gpu_model_graph_pdl_edges(const struct gpu_model *g, int n)
{
    return g->graphs && n >= 1 && n <= g->o.n_slots ? g->graph_pdl_edges[n] : -1;
}

int gpu_model_set_graphs(struct gpu_model *g, int on)
{
    g->use_graphs = on && g->graphs;
    return g->use_graphs;
}
