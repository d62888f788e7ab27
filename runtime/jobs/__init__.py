"""The job queue between web and workers: contracts, consumer, due sets, live workers."""
