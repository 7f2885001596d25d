/* gw_http: small HTTP/1.1 facts shared by the connection and exchange code. */
#ifndef GW_HTTP_H
#define GW_HTTP_H

/* Reason phrase for a status code ("OK", "Not Found", ...); "Unknown" otherwise. */
const char *gw_http_reason(int status);

#endif
