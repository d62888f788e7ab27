"""The job queue between web and workers: contracts, consumer, router, due sets, live workers."""
