/* daemon: gadgetd as a long-running supervisor — its options, the policy
 * directory, the control socket, the gateway and signals — on one libevent
 * loop, over the core (core/core.h) that runs the gadgets. */
#pragma once

int daemon_main(int argc, char **argv);
