/* gw_route: method + path -> handler, the API-key check, and the small endpoints. */
#ifndef GW_ROUTE_H
#define GW_ROUTE_H

struct gw;
struct gw_exch;

/* Dispatches a complete request; the handler owns the exchange's response from here. */
void gw_route_dispatch(struct gw *gw, struct gw_exch *x);

#endif
