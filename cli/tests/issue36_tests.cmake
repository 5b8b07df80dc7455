# Issue 36: reports that stay true on bytes, full outputs and replay files (see each test comment).
