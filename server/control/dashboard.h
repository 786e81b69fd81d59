/* The dashboard page served at GET / on the admin listener: one HTML file
 * (server/dashboard.html, plain JS and canvas, no external assets) turned
 * into a C array at build time by cmake/embed.cmake. */
#ifndef HE_DASHBOARD_H
#define HE_DASHBOARD_H

#include <stddef.h>

extern const char he_dashboard_html[];
extern const size_t he_dashboard_html_len;

#endif
