/*
 * version.h - the one version of traceprof's code, as its exports report it
 * (telemetry.sdk.version, the instrumentation scope, User-Agent).
 */
#ifndef TP_VERSION_H
#define TP_VERSION_H

#define TRACEPROF_VERSION "0.1.0"

#endif
