//! delivery (to be written)
