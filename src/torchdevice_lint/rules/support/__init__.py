"""What the rule families share: node helpers and fix builders, what a file knows about the files
it loads, and the example projects several rules' examples use."""
