"""What each modality contributes to the shared engines: reads, feeds, graph, reference."""
