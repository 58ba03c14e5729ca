"""reference_servers"""
