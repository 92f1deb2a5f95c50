/* a*b + c as written. Built twice: with the project's flags, and deliberately with
 * -ffp-contract=fast -mfma (tests/CMakeLists.txt), to show the difference would be caught. */
#ifndef PROBE_NAME
#error "PROBE_NAME must be defined by the build"
#endif
double PROBE_NAME(double a, double b, double c);
double PROBE_NAME(double a, double b, double c) { return a * b + c; }
