// Placeholder source for a library whose layer has no sources yet.
